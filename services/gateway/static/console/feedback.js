// How the console reports errors and trace ids: the server's own message,
// its status, the fields it names, and the trace id to find it in the logs.
import { clear, el } from "./dom.js";
import { t } from "./i18n.js";

/** Shows err (an ApiError or any Error) in box, a role="alert" element. */
export function showError(box, err) {
  clear(box);
  const http = err.httpStatus ? `HTTP ${err.httpStatus}` : "";
  const head = [http, err.status].filter(Boolean).join(" · ");
  box.append(
    el("p", { class: "error-head" }, el("strong", { text: t("error.title") }), head ? ` ${head}` : ""),
    el("p", { class: "error-message", text: err.message || String(err) }));
  // a field the message already states ("collections[0]: … is not a collection name") is not listed again
  const said = err.message || "";
  const fields = (err.fieldViolations || []).filter((f) => !said.includes(f.description || "\u0000"));
  if (fields.length) {
    box.append(el("ul", { class: "error-fields" }, fields.map((f) => el("li", {}, el("code", { text: f.field }), `: ${f.description}`))));
  }
  if (err.httpStatus === 401) box.append(el("p", { class: "hint", text: t("error.needKey") }));
  if (err.httpStatus === 429) box.append(el("p", { class: "hint", text: t("error.rateLimited") }));
  if (err.traceId) box.append(traceLine(err.traceId));
  box.hidden = false;
  if (err.httpStatus === 401) document.dispatchEvent(new CustomEvent("graphmesh:unauthenticated"));
}

/** Hides and empties an error box. */
export function hideError(box) {
  clear(box);
  box.hidden = true;
}

/** A small line with the request's trace id (X-Trace-Id), or "" when none. */
export function traceLine(traceId) {
  return traceId ? el("p", { class: "trace dim" }, `${t("trace")} `, el("code", { text: traceId })) : "";
}
