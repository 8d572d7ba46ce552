// Library panel, imports: the ImportDocuments long-running operations
// (google.longrunning.Operation, metadata IngestOperationMetadata) from
// GET /v1/operations: the running ones first, then the last few finished,
// each with its collection, progress, state and (running) a Cancel button
// (POST /v1/operations/{id}:cancel). Polled every second while one runs and
// the panel is shown; no polling when none runs.
import { get, post } from "./api.js";
import { clear, el } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { hideError, showError } from "./feedback.js";

const POLL_MS = 1000;
const FINISHED_SHOWN = 5;
const RUNNING_SHOWN = 50;
const CANCELLED = 1; // google.rpc.Code.CANCELLED: the import stopped after a cancel

/**
 * The state of an Operation (proto3 JSON): "running", "cancelling" (cancel asked, batch in progress), "done",
 * "partial" (ran to its end, some records or files failed), "cancelled" or "failed" (ended with an error, or
 * every record or file failed).
 */
export function operationState(op) {
  if (!op.done) return op.metadata && op.metadata.cancelRequested ? "cancelling" : "running";
  if (op.error) return op.error.code === CANCELLED ? "cancelled" : "failed";
  const p = progressOf(op);
  if (p.failed && !(p.stored || p.unchanged)) return "failed";
  return p.failed ? "partial" : "done";
}

/** The counts of an operation's metadata as numbers (proto3 JSON leaves zeros out): {total, received, stored, unchanged, failed}. */
export function progressOf(op) {
  const m = op.metadata || {};
  const n = (key) => Number(m[key] || 0);
  return { total: n("total"), received: n("received"), stored: n("stored"), unchanged: n("unchanged"), failed: n("failed") };
}

/**
 * The operations to show: running ones (newest first, at most 50), then the
 * newest 5 finished. One that finished between the two requests is shown
 * finished. Rejects with the ApiError of either request.
 */
export async function listOperations() {
  const page = (filter, size) => get(`./v1/operations?filter=${encodeURIComponent(filter)}&pageSize=${size}`);
  const running = (await page("done = false", RUNNING_SHOWN)).data.operations || [];
  const finished = (await page("done = true", FINISHED_SHOWN)).data.operations || [];
  const ended = new Set(finished.map((op) => op.name));
  return [...running.filter((op) => !ended.has(op.name)), ...finished];
}

const FAILURES_SHOWN = 3;

/**
 * Why the records or files of a finished import failed, from its response (an IngestResponse): one line per failed
 * file ("name: reason") or, for JSONL, per record ("line 3 (id): reason", 1-based), at most three, and how many more.
 * A trial's import whose records all failed said only "failed".
 */
export function failureLines(op) {
  const r = op.response || {};
  const files = (r.files || []).filter((f) => f.status === "FILE_STATUS_FAILED").map((f) => `${f.name}: ${f.reason || ""}`);
  const records = (r.failures || []).map((f) => `${t("imp.line", { n: Number(f.index || 0) + 1 })}${f.id ? ` (${f.id})` : ""}: ${f.reason || ""}`);
  const lines = (r.files || []).length ? files : records;
  const more = lines.length - FAILURES_SHOWN;
  return more > 0 ? [...lines.slice(0, FAILURES_SHOWN), t("imp.more", { n: more })] : lines;
}

const STATE_TEXT = {
  running: () => t("imp.state.running"), cancelling: () => t("imp.state.cancelling"), done: () => t("imp.state.done"),
  cancelled: () => t("imp.state.cancelled"), failed: () => t("imp.state.failed"), partial: () => t("imp.state.partial"),
};
const BADGE = { running: "running", cancelling: "running", done: "stored", partial: "unchanged", cancelled: "unchanged", failed: "failed" };

function time(value) {
  const date = value ? new Date(value) : null;
  return date && !Number.isNaN(date.getTime()) ? date.toLocaleTimeString() : "";
}

function failureList(op) {
  const lines = failureLines(op);
  return lines.length ? el("ul", { class: "op-failures" }, ...lines.map((text) => el("li", { text }))) : null;
}

function operationRow(op, onCancel) {
  const state = operationState(op);
  const p = progressOf(op);
  const running = state === "running" || state === "cancelling";
  const collection = (op.metadata && op.metadata.collection) || "";
  const bar = el("progress", { max: String(Math.max(p.total, 1)), "aria-label": t("imp.progressLabel", { name: op.name }) });
  if (p.total) bar.value = p.received;
  else if (!running) bar.value = 1;  // nothing to count, finished: a full bar, not an indeterminate one
  const started = time(op.metadata && op.metadata.createTime);
  return el("li", { class: `operation ${state}`, dataset: { name: op.name, state, ...Object.fromEntries(Object.entries(p).map(([k, v]) => [k, String(v)])) } },
    el("p", { class: "op-head" },
      el("span", { class: `badge status ${BADGE[state]}`, text: STATE_TEXT[state]() }), " ",
      el("code", { class: "op-collection", text: collection }),
      el("span", { class: "op-counts", text: ` · ${t("imp.counts", p)}` }),
      started ? el("span", { class: "dim", text: ` · ${t("imp.started", { time: started })}` }) : null,
      state === "running" ? el("button", { type: "button", class: "op-cancel", onclick: (event) => onCancel(op.name, event.currentTarget),
        "aria-label": t("imp.cancelLabel", { name: op.name }), text: t("imp.cancel") }) : null),
    bar,
    op.error && op.error.message ? el("p", { class: state === "failed" ? "op-error" : "op-error dim", text: op.error.message }) : null,
    op.done && !op.error ? failureList(op) : null,
    el("p", { class: "trace dim" }, el("code", { text: op.name })));
}

/**
 * Wires the imports list: list (an <ol>), errorBox (role="alert"), refreshButton.
 * onFinished() is called when an operation seen running has finished (the
 * panel then refreshes its collection counts). Returns {show, hide, refresh}:
 * show lists and polls, hide stops polling, refresh lists again (and polls
 * while one runs) — call it after starting an import.
 */
export function setupImports({ list, errorBox, refreshButton, onFinished }) {
  let shown = false;
  let timer = null;
  let seq = 0;
  let latest = null;
  const running = new Set();

  function render() {
    clear(list);
    if (!latest.length) list.append(el("li", { class: "dim empty", text: t("imp.none") }));
    for (const op of latest) list.append(operationRow(op, cancel));
  }

  async function refresh() {
    clearTimeout(timer);
    timer = null;
    const mine = ++seq;
    list.dataset.state = latest ? list.dataset.state : "loading";
    let ops;
    try {
      ops = await listOperations();
    } catch (err) {
      if (mine !== seq) return;
      showError(errorBox, err);
      list.dataset.state = "error";
      list.dataset.polling = "false";
      return;
    }
    if (mine !== seq) return;  // a newer refresh answers
    hideError(errorBox);
    latest = ops;
    render();
    const finished = ops.some((op) => op.done && running.has(op.name));
    running.clear();
    ops.filter((op) => !op.done).forEach((op) => running.add(op.name));
    const poll = shown && running.size > 0;
    if (poll) timer = setTimeout(refresh, POLL_MS);
    list.dataset.polling = String(poll);  // tests wait on it
    list.dataset.state = "done";
    if (finished && onFinished) onFinished();
  }

  async function cancel(name, button) {
    button.disabled = true;
    try {
      await post(`./v1/${name}:cancel`, {});
    } catch (err) {
      showError(errorBox, err);
      button.disabled = false;
      return;
    }
    await refresh();
  }

  refreshButton.addEventListener("click", refresh);
  onLanguage(() => { if (latest) render(); });
  return {
    show() { shown = true; return refresh(); },
    hide() { shown = false; clearTimeout(timer); timer = null; list.dataset.polling = "false"; },
    refresh,
  };
}
