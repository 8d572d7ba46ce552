// The REST client of the console: only the gateway's public routes, with
// the API key (if any) from sessionStorage as "Authorization: Bearer KEY".

const KEY_STORAGE = "graphmesh.apiKey";

/** The API key kept for this browser tab ("" when none). */
export function apiKey() {
  try { return sessionStorage.getItem(KEY_STORAGE) || ""; } catch { return ""; }
}

/** Keeps the key for this tab only (sessionStorage); "" forgets it. */
export function setApiKey(value) {
  const key = (value || "").trim();
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch { /* storage disabled: the key lives only in the field */ }
}

function headers(extra = {}) {
  const result = { ...extra };
  const key = apiKey();
  if (key) result.Authorization = `Bearer ${key}`;
  return result;
}

/** An error reply of the API: HTTP status, google.rpc status name, the server's message, details. */
export class ApiError extends Error {
  constructor(httpStatus, status, message, details = [], traceId = null) {
    super(message);
    this.httpStatus = httpStatus;
    this.status = status;
    this.details = details;
    this.traceId = traceId;
  }

  /** Field violations of a google.rpc.BadRequest detail: [{field, description}]. */
  get fieldViolations() {
    return this.details.flatMap((d) => (d && d.fieldViolations) || []);
  }
}

async function errorOf(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  const error = (body && body.error) || {};
  return new ApiError(response.status, error.status || "", error.message || response.statusText || `HTTP ${response.status}`,
    error.details || [], response.headers.get("X-Trace-Id"));
}

async function send(method, path, body, signal) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "UNAVAILABLE", `${path}: ${err.message}`);
  }
  if (!response.ok) throw await errorOf(response);
  return { data: await response.json(), traceId: response.headers.get("X-Trace-Id") };
}

/** POSTs JSON to a REST route; resolves {data, traceId}; rejects with ApiError. */
export function post(path, body, signal) {
  return send("POST", path, body, signal);
}

/** GETs a JSON route; resolves {data, traceId}; rejects with ApiError. */
export function get(path, signal) {
  return send("GET", path, undefined, signal);
}

/**
 * POSTs to a server-streaming route with Accept: text/event-stream and calls
 * onEvent(event) for each server-sent event as it arrives (read from the
 * response body stream). onOpen(traceId) is called when the stream starts.
 * An error before the stream is an ApiError with the server's message; an
 * {"error": ...} event in the stream is thrown as one too.
 */
export async function stream(path, body, { onEvent, onOpen, signal } = {}) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "UNAVAILABLE", `${path}: ${err.message}`);
  }
  if (!response.ok) throw await errorOf(response);
  const traceId = response.headers.get("X-Trace-Id");
  if (onOpen) onOpen(traceId);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const dispatch = (block) => {
    const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
    if (!data) return;
    const event = JSON.parse(data);
    if (event.error) throw new ApiError(event.error.code || 500, event.error.status || "", event.error.message || "", [], traceId);
    onEvent(event);
  };
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      dispatch(block);
    }
    if (done) break;
  }
  if (buffer.trim()) dispatch(buffer);
  return traceId;
}
