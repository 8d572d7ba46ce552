// Library panel: counts per collection, and ingestion of a JSONL file by
// drag and drop (or the file picker) through POST /v1/documents:ingest
// (base64 "jsonl", "kind" documents / entities / triples). Gzipped files are
// unpacked in the browser first.
import { post } from "./api.js";
import { clear, el, ms } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { hideError, showError, traceLine } from "./feedback.js";

// ---- HOOK: collection listing (issue 15) ----------------------------------
// The collections/documents API is being built in issue 15 and is not a
// public route yet, so nothing here may call it. When it lands, make
// listCollections() call its REST route and resolve to
//   [{name, documents, chunks, entities, triples}]
// (counts as numbers); the table below renders whatever it returns. Until
// then it resolves to null and the panel says that listing is not available.
export async function listCollections() {
  return null;
}
// ---------------------------------------------------------------------------

const KINDS = { documents: "INGEST_KIND_DOCUMENTS", entities: "INGEST_KIND_ENTITIES", triples: "INGEST_KIND_TRIPLES" };

/** The kind of records a JSONL text holds, from its first record: triples ({subject, predicate}), entities ({name}), else documents. */
export function guessKind(text) {
  const first = String(text).split(/\r?\n/).find((line) => line.trim());
  try {
    const record = JSON.parse(first || "{}");
    if ("subject" in record && "predicate" in record) return "triples";
    if ("name" in record && !("text" in record)) return "entities";
  } catch { /* unreadable first line: the server reports it */ }
  return "documents";
}

/** Bytes as base64 (the JSON form of a proto bytes field). */
export function toBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

async function readFile(file) {
  if (/\.gz$/i.test(file.name) && "DecompressionStream" in window) {
    const unpacked = file.stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(unpacked).arrayBuffer());
  }
  return new Uint8Array(await file.arrayBuffer());
}

const COLUMNS = ["documents", "chunks", "entities", "triples"];

function countsTable(rows, className) {
  return el("table", { class: className },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: t("lib.collection") }), COLUMNS.map((c) => el("th", { scope: "col", text: t(`lib.${c}`) })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, el("th", { scope: "row", text: r.name }),
      COLUMNS.map((c) => el("td", { class: "num", dataset: { col: c }, text: String(r[c] ?? "–") }))))));
}

/** What this tab ingested, from the ingest replies (stored records, chunks written). */
const tally = { documents: 0, chunks: 0, entities: 0, triples: 0 };

function collectionsTable(node, rows) {
  clear(node);
  if (rows !== null) {
    node.append(countsTable(rows, "collections"));
    return;
  }
  node.append(el("p", { class: "notice", dataset: { hook: "listCollections" }, text: t("lib.noListing") }),
    countsTable([{ name: t("lib.thisTab"), ...tally }], "collections tally"));
}

function resultRow(file, kind, reply, traceId) {
  const failures = reply.failures || [];
  return el("li", { class: "ingest-result" },
    el("p", {}, el("strong", { text: file }), ` · ${t(`lib.kind.${kind}`)} · `,
      t("lib.counts", { received: reply.received || 0, stored: reply.stored || 0, unchanged: reply.unchanged || 0, chunks: reply.chunks || 0 })),
    el("p", { class: "dim", text: (reply.timings || []).map((s) => `${s.stage} ${ms(s.durationMs)}`).join(" · ") }),
    failures.length ? el("details", {}, el("summary", { text: t("lib.failures", { n: failures.length }) }),
      el("ul", {}, failures.map((f) => el("li", { text: `#${f.index}${f.id ? ` (${f.id})` : ""}: ${f.reason}` })))) : null,
    traceLine(traceId));
}

/** Wires the Library panel. */
export function setupLibrary(root) {
  const zone = root.querySelector("#lib-drop");
  const picker = root.querySelector("#lib-file");
  const kindSelect = root.querySelector("#lib-kind");
  const results = root.querySelector("#lib-results");
  const errorBox = root.querySelector("#lib-error");
  const status = root.querySelector("#lib-status");
  const table = root.querySelector("#lib-collections");

  async function refreshCollections() {
    try {
      collectionsTable(table, await listCollections());
    } catch (err) {
      showError(errorBox, err);
    }
  }

  async function ingest(file) {
    hideError(errorBox);
    status.textContent = t("lib.reading", { name: file.name });
    try {
      const bytes = await readFile(file);
      const kind = kindSelect.value === "auto" ? guessKind(new TextDecoder().decode(bytes.subarray(0, 4096))) : kindSelect.value;
      status.textContent = t("lib.sending", { name: file.name, kind: t(`lib.kind.${kind}`) });
      const { data, traceId } = await post("./v1/documents:ingest", { jsonl: toBase64(bytes), kind: KINDS[kind] });
      results.prepend(resultRow(file.name, kind, data, traceId));
      tally[kind] += data.stored || 0;
      tally.chunks += data.chunks || 0;
      status.textContent = t("lib.done", { name: file.name });
      refreshCollections();
    } catch (err) {
      status.textContent = "";
      showError(errorBox, err);
    }
  }

  async function ingestAll(files) {
    for (const file of files) await ingest(file);
  }

  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    ingestAll([...(event.dataTransfer?.files || [])]);
  });
  picker.addEventListener("change", () => { ingestAll([...picker.files]); picker.value = ""; });
  onLanguage(refreshCollections);
  refreshCollections();
  return { ingest };
}
