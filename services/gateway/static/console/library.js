// Library panel: the collections with their counts (GET /v1/collections),
// and ingestion by drag and drop (or the file picker) into a chosen
// collection through POST /v1/documents:ingest: JSONL records (base64
// "jsonl", "kind" documents / entities / triples; gzipped files are unpacked
// in the browser first), or any other file as one document each (base64
// "files": .txt, .md, .html, .pdf, .docx, .csv, .tsv; the server picks the parser from
// the name and says per file whether it was stored, unchanged or failed).
// As an import (the "import" box ticked, or files over LARGE_UPLOAD_BYTES)
// the same request goes to POST /v1/documents:import, and the imports list
// (imports.js) shows its progress. A collection's name opens its documents
// (GET /v1/collections/{c}/documents), each with a button deleting it
// (POST /v1/collections/{c}/documents:batchDelete).
import { get, post } from "./api.js";
import { clear, collectionName, el, ms } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { hideError, showError, traceLine } from "./feedback.js";
import { setupImports } from "./imports.js";

/** Uploads of more bytes than this (all files together) always run as an import, with progress. */
export const LARGE_UPLOAD_BYTES = 8 * 1024 * 1024;

/**
 * The collections with their counts, from GET /v1/collections, resolved as
 * [{name, documents, chunks, entities}] (numbers; proto3 JSON leaves zero
 * counts out, so a missing count is 0). Rejects with the ApiError.
 */
export async function listCollections() {
  const { data } = await get("./v1/collections");
  return (data.collections || []).map((c) => ({
    ...c,
    name: c.name || "",
    documents: Number(c.documents || 0),
    chunks: Number(c.chunks || 0),
    entities: Number(c.entities || 0),
  }));
}

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

/** Whether a file holds JSONL records (ingested as "jsonl") rather than a document (ingested as "files"). */
export function isRecordsFile(name) {
  return /\.(jsonl|ndjson|json)(\.gz)?$/i.test(name) || /\.gz$/i.test(name);
}

// Counts a collection carries; "triples" only when a reply names it.
const COLUMNS = ["documents", "chunks", "entities", "triples"];

function countsTable(rows, highlight) {
  const columns = COLUMNS.filter((c) => c !== "triples" || rows.some((r) => "triples" in r));
  return el("table", { class: "collections" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: t("lib.collection") }),
      columns.map((c) => el("th", { scope: "col", class: "num", text: t(`lib.${c}`) })))),
    el("tbody", {}, rows.map((r) => el("tr", { class: r.name === highlight ? "current" : null, dataset: { collection: r.name } },
      el("th", { scope: "row" }, el("button", { type: "button", class: "show-documents link", dataset: { collection: r.name },
        title: t("lib.showDocuments"), text: r.name })),
      columns.map((c) => el("td", { class: "num", dataset: { col: c }, text: String(r[c] ?? "–") }))))));
}

const FILE_STATUS = { FILE_STATUS_STORED: "stored", FILE_STATUS_UNCHANGED: "unchanged", FILE_STATUS_FAILED: "failed" };
const FILE_STATUS_TEXT = { stored: () => t("lib.file.stored"), unchanged: () => t("lib.file.unchanged"), failed: () => t("lib.file.failed") };

function timingsLine(reply) {
  return el("p", { class: "dim", text: (reply.timings || []).map((s) => `${s.stage} ${ms(s.durationMs)}`).join(" · ") });
}

/** The result of one JSONL file (records of one kind). */
function recordsRow(file, kind, collection, reply, traceId) {
  const failures = reply.failures || [];
  return el("li", { class: "ingest-result", dataset: { kind: "records" } },
    el("p", {}, el("strong", { text: file }), ` · ${t(`lib.kind.${kind}`)} → `, el("code", { text: collection }), " · ",
      t("lib.counts", { received: reply.received || 0, stored: reply.stored || 0, unchanged: reply.unchanged || 0, chunks: reply.chunks || 0 })),
    timingsLine(reply),
    failures.length ? el("details", {}, el("summary", { text: t("lib.failures", { n: failures.length }) }),
      el("ul", {}, failures.map((f) => el("li", { text: `#${f.index}${f.id ? ` (${f.id})` : ""}: ${f.reason}` })))) : null,
    traceLine(traceId));
}

/** The result of one call with files: one line per file (stored / unchanged / failed with the server's reason). */
function filesRow(names, collection, reply, traceId) {
  const outcomes = reply.files || [];
  return el("li", { class: "ingest-result", dataset: { kind: "files" } },
    el("p", {}, el("strong", { text: t("lib.filesInto", { n: names.length }) }), " ", el("code", { text: collection }), " · ",
      t("lib.fileCounts", { stored: reply.stored || 0, unchanged: reply.unchanged || 0, chunks: reply.chunks || 0 })),
    el("ul", { class: "file-outcomes" }, outcomes.map((o, i) => {
      const status = FILE_STATUS[o.status] || "failed";
      const facts = [o.mediaType, o.pages ? t("lib.pages", { n: o.pages }) : "", status === "stored" ? t("lib.chunksN", { n: o.chunks || 0 }) : ""]
        .filter(Boolean).join(" · ");
      return el("li", { class: `file-outcome ${status}`, dataset: { status, name: o.name || names[i] || "" } },
        el("span", { class: `badge status ${status}`, text: FILE_STATUS_TEXT[status]() }), " ",
        el("strong", { class: "file-name", text: o.name || names[i] || "" }),
        o.documentId && o.documentId !== o.name ? el("span", { class: "dim" }, " → ", el("code", { text: o.documentId })) : null,
        facts ? el("span", { class: "dim", text: ` · ${facts}` }) : null,
        o.reason ? el("p", { class: "file-reason", text: o.reason }) : null,
        o.replaced ? el("p", { class: "file-replaced", text: t("lib.replaced") }) : null,
        o.duplicateOf ? el("p", { class: "file-duplicate", text: t("lib.duplicateOf", { id: o.duplicateOf }) }) : null,
        (o.sameTitleAs || []).length ? el("p", { class: "file-duplicate", text: t("lib.sameTitleAs", { ids: o.sameTitleAs.join(", ") }) }) : null);
    })),
    timingsLine(reply),
    traceLine(traceId));
}

/** The row of an upload sent as an import: its operation's name; the imports list shows its progress. */
function importRow(label, collection, op, traceId) {
  return el("li", { class: "ingest-result", dataset: { kind: "import", operation: op.name || "" } },
    el("p", {}, el("strong", { text: label }), " → ", el("code", { text: collection }), " · ",
      t("lib.importStarted"), " ", el("code", { text: op.name || "" })),
    traceLine(traceId));
}

/** Documents of ``collection`` shown at most (its first page); the list says when there are more. */
export const DOCUMENTS_SHOWN = 200;

/** The documents list of one collection: title, id and chunks each, with a delete button. */
function documentsList(collection, documents, more) {
  return el("section", { class: "documents", dataset: { collection } },
    el("h3", { text: t("lib.documentsOf", { collection }) }),
    documents.length ? el("ul", { class: "document-list" }, documents.map((d) => {
      const id = String(d.name || "").split("/documents/").slice(1).join("/documents/");
      return el("li", { class: "document", dataset: { id } },
        el("strong", { text: d.title || id }), " ", el("code", { text: id }),
        el("span", { class: "dim", text: ` · ${t("lib.chunksN", { n: Number(d.chunkCount || 0) })}` }), " ",
        el("button", { type: "button", class: "delete-document", dataset: { name: d.name || "", id }, text: t("lib.delete") }));
    })) : el("p", { class: "dim empty", text: t("lib.noDocuments") }),
    more ? el("p", { class: "dim", text: t("lib.moreDocuments", { n: DOCUMENTS_SHOWN }) }) : null);
}

/** Wires the Library panel. */
export function setupLibrary(root) {
  const zone = root.querySelector("#lib-drop");
  const picker = root.querySelector("#lib-file");
  const kindSelect = root.querySelector("#lib-kind");
  const collectionInput = root.querySelector("#lib-collection");
  // Ask and Entities search the collection the library imports into, unless changed there since.
  collectionInput.addEventListener("input", () => {
    for (const field of root.querySelectorAll(".scope-collection")) field.value = collectionName(collectionInput.value);
  });
  const results = root.querySelector("#lib-results");
  const errorBox = root.querySelector("#lib-error");
  const listErrorBox = root.querySelector("#lib-list-error");
  const status = root.querySelector("#lib-status");
  const table = root.querySelector("#lib-collections");
  const refreshButton = root.querySelector("#lib-refresh");
  const asImport = root.querySelector("#lib-async");
  const imports = setupImports({ list: root.querySelector("#lib-operations"), errorBox: root.querySelector("#lib-ops-error"),
    refreshButton: root.querySelector("#lib-ops-refresh"), onFinished: () => refreshCollections() });

  const documentsBox = root.querySelector("#lib-documents");
  let shownCollection = "";

  async function showDocuments(collection) {
    shownCollection = collection;
    documentsBox.dataset.state = "loading";
    try {
      const { data } = await get(`./v1/collections/${encodeURIComponent(collection)}/documents?pageSize=${DOCUMENTS_SHOWN}`);
      hideError(listErrorBox);
      clear(documentsBox);
      documentsBox.append(documentsList(collection, data.documents || [], Boolean(data.nextPageToken)));
      documentsBox.dataset.state = "done";
    } catch (err) {
      clear(documentsBox);
      showError(listErrorBox, err);
      documentsBox.dataset.state = "error";
    }
  }

  async function deleteDocument(name, id) {
    if (!window.confirm(t("lib.deleteConfirm", { id }))) return;
    const parent = `collections/${shownCollection}`;
    try {
      await post(`./v1/${parent.split("/").map(encodeURIComponent).join("/")}/documents:batchDelete`, { names: [name] });
      status.textContent = t("lib.deleted", { id });
    } catch (err) {
      showError(listErrorBox, err);
    }
    await refreshCollections();
    await showDocuments(shownCollection);
  }

  table.addEventListener("click", (event) => {
    const button = event.target.closest("button.show-documents");
    if (button) showDocuments(button.dataset.collection);
  });
  documentsBox.addEventListener("click", (event) => {
    const button = event.target.closest("button.delete-document");
    if (button) deleteDocument(button.dataset.name, button.dataset.id);
  });

  async function refreshCollections() {
    table.dataset.state = "loading";
    try {
      const rows = await listCollections();
      hideError(listErrorBox);
      clear(table);
      table.append(rows.length ? countsTable(rows, collectionName(collectionInput.value))
        : el("p", { class: "dim empty", text: t("lib.noCollections") }));
      table.dataset.state = "done";
    } catch (err) {
      clear(table);
      table.append(el("p", { class: "list-failed", text: t("lib.listFailed") }));
      showError(listErrorBox, err);
      table.dataset.state = "error";
    }
  }

  async function readText(file) {
    status.textContent = t("lib.reading", { name: file.name });
    return readFile(file);
  }

  async function startImport(label, body) {
    const { data, traceId } = await post("./v1/documents:import", body);
    results.prepend(importRow(label, body.collection, data, traceId));
    imports.refresh();
    return t("lib.importsStarted", { name: label });
  }

  async function ingestRecords(file, collection, asOperation) {
    const bytes = await readText(file);
    const kind = kindSelect.value === "auto" ? guessKind(new TextDecoder().decode(bytes.subarray(0, 4096))) : kindSelect.value;
    status.textContent = t("lib.sending", { name: file.name, kind: t(`lib.kind.${kind}`) });
    const body = { jsonl: toBase64(bytes), kind: KINDS[kind], collection };
    if (asOperation) return startImport(file.name, body);
    const { data, traceId } = await post("./v1/documents:ingest", body);
    results.prepend(recordsRow(file.name, kind, collection, data, traceId));
    return "";
  }

  async function ingestFiles(files, collection, asOperation) {
    const payload = [];
    for (const file of files) {
      const bytes = await readText(file);
      // No media type: the server picks the parser from the name's extension
      // (a browser's guess such as application/octet-stream would be refused).
      payload.push({ name: file.name, content: toBase64(bytes) });
    }
    status.textContent = t("lib.sendingFiles", { n: files.length, collection });
    if (asOperation) return startImport(t("lib.filesN", { n: files.length }), { files: payload, collection });
    const { data, traceId } = await post("./v1/documents:ingest", { files: payload, collection });
    results.prepend(filesRow(files.map((f) => f.name), collection, data, traceId));
    const failed = (data.files || []).filter((o) => FILE_STATUS[o.status] !== "stored" && FILE_STATUS[o.status] !== "unchanged").length;
    return t("lib.filesDone", { n: files.length, stored: data.stored || 0, unchanged: data.unchanged || 0, failed });
  }

  let finished = 0;

  async function ingestAll(files) {
    if (!files.length) return;
    results.dataset.state = "busy";
    hideError(errorBox);
    const collection = collectionName(collectionInput.value);
    const records = files.filter((f) => isRecordsFile(f.name));
    const documents = files.filter((f) => !isRecordsFile(f.name));
    const asOperation = asImport.checked || files.reduce((sum, f) => sum + f.size, 0) > LARGE_UPLOAD_BYTES;
    try {
      const started = [];
      for (const file of records) started.push(await ingestRecords(file, collection, asOperation));
      const filesDone = documents.length ? await ingestFiles(documents, collection, asOperation) : "";
      status.textContent = asOperation ? [...started, filesDone].filter(Boolean).join(" ")
        : filesDone || t("lib.done", { name: records.map((f) => f.name).join(", ") });
    } catch (err) {
      status.textContent = "";
      showError(errorBox, err);
    }
    await refreshCollections();
    results.dataset.done = String(++finished);  // ingests finished, counts refreshed (tests wait on it)
    results.dataset.state = "done";
  }

  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    ingestAll([...(event.dataTransfer?.files || [])]);
  });
  picker.addEventListener("change", () => { const chosen = [...picker.files]; picker.value = ""; ingestAll(chosen); });
  refreshButton.addEventListener("click", refreshCollections);
  // Listed when the panel is shown (not at page load: a gateway with auth
  // on would answer 401 before a key is entered), re-rendered on a language
  // change once listed.
  onLanguage(() => { if (table.dataset.state) refreshCollections(); });
  return {
    show() { imports.show(); return refreshCollections(); },
    hide: imports.hide,
    ingest: (file) => ingestAll([file]),
  };
}
