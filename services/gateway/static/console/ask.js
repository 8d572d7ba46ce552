// Ask panel: Search, Answer (streamed) and DeepSearch over the public REST
// routes; the stage timeline, the answer with its citations [n] linked to
// the sources, each source's channels, scores and evidence, the strategy
// that answered and the services the answer was built without.
import { post, stream } from "./api.js";
import { append, clear, collectionName, collectionNames, el, enumName, ms, score } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { showError, hideError, traceLine } from "./feedback.js";

const ROUTES = { search: "./v1/query:search", answer: "./v1/query:answerStream", deep: "./v1/query:deepSearch" };

/**
 * The one normalisation every question gets before it is sent, typed or
 * spoken: runs of whitespace (spaces a recogniser puts between words,
 * newlines) become one space, and the ends are trimmed. What the server
 * does beyond that (NFKC, normalisation to library names) it reports back.
 */
export function normalizeQuestion(text) {
  return String(text || "").replace(/\s+/gu, " ").trim();
}

/** Title plus the headings below it: the label the fuser gives a packed source. */
export function sourceLabel(candidate) {
  const title = candidate.title || "";
  return [title, ...(candidate.headingPath || []).filter((h) => h && h !== title)].filter(Boolean).join(" ");
}

/** The packed context split into {number: {label, text, truncated}}. */
export function contextBlocks(context) {
  const blocks = new Map();
  const re = /^\[(\d+)\] (.*)$/gmu;
  const marks = [...String(context || "").matchAll(re)];
  marks.forEach((m, i) => {
    const end = i + 1 < marks.length ? marks[i + 1].index : context.length;
    const body = context.slice(m.index + m[0].length, end);
    blocks.set(Number(m[1]), { label: m[2].trim(), text: body, truncated: body.includes("[TRUNCATED]") });
  });
  return blocks;
}

/**
 * Each result with what is known of it in the context: {candidate, number
 * (its [n], or null), cited, truncated (true/false, or null when it is not
 * in the context), boosted (a pg.boost score)}. Cited ones first, by number.
 * ``contextIds`` (SearchResponse.contextIds) numbers the packed results; a
 * server without it is matched by label.
 */
export function sourcesOf(results, context, citations = [], contextIds = []) {
  const blocks = contextBlocks(context);
  const byCandidate = new Map(citations.map((c) => [c.candidateId, c.number]));
  const packed = new Map((contextIds || []).map((id, i) => [id, i + 1]));
  const used = new Set(byCandidate.values());
  const rows = (results || []).map((candidate) => {
    let number = byCandidate.has(candidate.id) ? byCandidate.get(candidate.id) : (packed.get(candidate.id) ?? null);
    if (number === null && !packed.size) {
      const label = sourceLabel(candidate);
      for (const [n, block] of blocks) {
        if (!used.has(n) && block.label === label) { number = n; used.add(n); break; }
      }
    }
    const block = number === null ? null : blocks.get(number);
    return {
      candidate, number, cited: byCandidate.has(candidate.id),
      truncated: block ? block.truncated : null,
      boosted: (candidate.channelScores || []).some((s) => s.channel === "pg.boost"),
    };
  });
  const cited = rows.filter((r) => r.cited).sort((a, b) => a.number - b.number);
  return [...cited, ...rows.filter((r) => !r.cited)];
}

function statusBadge(status) {
  const name = enumName(status, "STAGE_STATUS_") || "ok";
  return el("span", { class: `badge status-${name}`, text: t(`status.${name}`) });
}

/** The live stage timeline: add(stageTiming) appends one line. */
function timeline() {
  const list = el("ol", { class: "timeline", "aria-label": t("ask.timeline") });
  return {
    node: el("section", { class: "card" }, el("h3", { text: t("ask.timeline") }), list),
    add(timing) {
      const degraded = timing.status === "STAGE_STATUS_DEGRADED";
      list.append(el("li", { class: `stage${degraded ? " degraded" : ""}`, dataset: { stage: timing.stage } },
        el("span", { class: "stage-name", text: timing.stage }), statusBadge(timing.status),
        el("span", { class: "stage-ms", text: timing.status === "STAGE_STATUS_SKIPPED" ? "" : ms(timing.durationMs) }),
        timing.detail ? el("span", { class: "stage-detail", text: timing.detail }) : null));
    },
  };
}

/** Answer text with each [n] turned into a link to source n. */
function answerText(text, known, output) {
  const node = el("div", { class: "answer-text", lang: "zh" });
  const parts = String(text || "").split(/(\[\d+\])/u);
  for (const part of parts) {
    const m = part.match(/^\[(\d+)\]$/u);
    if (m && known.has(Number(m[1]))) {
      const n = Number(m[1]);
      node.append(el("a", {
        class: "cite", href: `#src-${n}`, dataset: { n: String(n) }, "aria-label": t("ask.citeLabel", { n }),
        onclick: (event) => { event.preventDefault(); revealSource(output, n); },
      }, `[${n}]`));
    } else if (part) {
      node.append(part);
    }
  }
  return node;
}

/** Opens, scrolls to, highlights and focuses source n inside output. */
export function revealSource(output, n) {
  const target = output.querySelector(`#src-${n}`);
  if (!target) return;
  output.querySelectorAll(".source.highlight").forEach((s) => s.classList.remove("highlight"));
  const details = target.querySelector("details");
  if (details) details.open = true;
  target.classList.add("highlight");
  target.scrollIntoView({ block: "start", behavior: "auto" });
  target.focus({ preventScroll: true });
}

function channelTable(scores) {
  return el("table", { class: "channels" },
    el("caption", { text: t("src.channels") }),
    el("thead", {}, el("tr", {}, ["src.channel", "src.score", "src.rank", "src.evidence"].map((k) => el("th", { scope: "col", text: t(k) })))),
    el("tbody", {}, (scores || []).map((s) => el("tr", {},
      el("td", { class: "mono", text: s.channel }), el("td", { class: "num", text: score(s.score) }),
      el("td", { class: "num", text: s.rank ? String(s.rank) : "–" }), el("td", { class: "evidence", text: s.evidence || "" })))));
}

function sourceCard(row, index) {
  const c = row.candidate;
  const flags = [
    row.cited ? el("span", { class: "flag cited", text: t("src.cited") }) : null,
    row.boosted ? el("span", { class: "flag boosted", text: t("src.boosted") }) : null,
    row.truncated === true ? el("span", { class: "flag truncated", text: t("src.truncated") }) : null,
    row.truncated === false ? el("span", { class: "flag whole", text: t("src.whole") }) : null,
    row.number === null ? el("span", { class: "flag", text: t("src.notPacked") }) : null,
    // the document's own metadata (a law's status: a paralegal trial's console showed a repealed article unmarked)
    ...Object.entries(c.metadata || {}).slice(0, META_SHOWN).map(([k, v]) => el("span", { class: "flag meta", text: `${k}: ${v}` })),
  ];
  const id = row.number !== null ? `src-${row.number}` : `res-${index}`;
  const heading = (c.headingPath && c.headingPath.length ? c.headingPath : [c.title || c.documentId]).filter(Boolean);
  return el("li", { class: "source", id, tabindex: "-1" },
    el("details", { open: row.cited },
      el("summary", {},
        el("span", { class: "src-num", text: row.number !== null ? `[${row.number}]` : `#${index + 1}` }),
        el("span", { class: "src-label", text: sourceLabel(c) || c.id }),
        el("span", { class: "src-fused", text: `${t("src.fused")} ${score(c.fusedScore)}` })),
      el("nav", { class: "crumbs", "aria-label": t("src.headings") }, el("ol", {}, heading.map((h) => el("li", { text: h })))),
      el("p", { class: "flags" }, flags, el("span", { class: "mono dim", text: `${c.id} · ${enumName(c.source, "SOURCE_")}` })),
      el("blockquote", { class: "src-text", lang: "zh", text: c.text || "" }),
      channelTable(c.channelScores)));
}

/** Metadata entries shown on a source card, at most. */
const META_SHOWN = 4;

function sourcesSection(rows) {
  const cited = rows.filter((r) => r.cited);
  const others = rows.filter((r) => !r.cited);
  return el("section", { class: "card sources" },
    el("h3", { text: t("ask.sources", { n: rows.length }) }),
    cited.length ? el("ol", { class: "source-list" }, cited.map(sourceCard)) : null,
    others.length ? [el("h4", { text: cited.length ? t("ask.moreEvidence") : t("ask.evidence") }),
      el("ol", { class: "source-list" }, others.map((r, i) => sourceCard(r, cited.length + i)))] : null);
}

const STAGE_SERVICES = { expand: "expander", expansion: "expander", hyde: "expander", embed: "expander", normalize: "expander",
  rerank: "reranker", fuse: "fuser", rank: "fuser", generate: "llm" };

/** The service behind a pipeline stage ("retrieve.graph" -> "retriever_graph"); null for strategy.* and total. */
export function serviceOfStage(stage) {
  const retrieve = /^retrieve(?:_entities)?\.(\w+)$/u.exec(stage || "");
  return retrieve ? `retriever_${retrieve[1]}` : STAGE_SERVICES[stage] || null;
}

/**
 * Every service the request went without: the response's own "degraded"
 * list, and the service of every stage that reported DEGRADED (a strategy
 * passed over because a retriever was down leaves the final search with an
 * empty list; the stream still said so). [{service, detail}], in order seen.
 */
export function degradedServices(listed, timings) {
  const found = new Map((listed || []).map((s) => [s, ""]));
  for (const timing of timings || []) {
    const service = timing.status === "STAGE_STATUS_DEGRADED" ? serviceOfStage(timing.stage) : null;
    if (service && !found.get(service)) found.set(service, timing.detail || "");
  }
  return [...found].map(([service, detail]) => ({ service, detail }));
}

function degradedBanner(listed, timings) {
  const degraded = degradedServices(listed, timings);
  if (!degraded.length) return null;
  return el("div", { class: "degraded-banner", role: "status" },
    el("strong", { text: t("ask.degraded") }), " ",
    degraded.map((d) => el("span", { class: "badge status-degraded", dataset: { service: d.service }, title: d.detail, text: d.service })), " ",
    el("span", { text: t("ask.degradedHint") }),
    degraded.some((d) => d.detail) ? el("ul", { class: "degraded-details" },
      degraded.filter((d) => d.detail).map((d) => el("li", {}, el("code", { text: d.service }), `: ${d.detail}`))) : null);
}

function queryInfo(info) {
  if (!info) return null;
  const row = (key, value) => (value && (!Array.isArray(value) || value.length)
    ? [el("dt", { text: t(key) }), el("dd", { lang: "zh", text: Array.isArray(value) ? value.join(" · ") : value })] : null);
  return el("section", { class: "card" }, el("h3", { text: t("ask.understanding") }),
    el("dl", { class: "facts" }, row("qi.normalized", info.normalizedQuery), row("qi.type", enumName(info.questionType, "QUESTION_TYPE_")),
      row("qi.profile", info.profile), row("qi.keywords", info.keywords), row("qi.expansions", info.expansions)));
}

function modeText(mode) {
  const name = enumName(mode, "ANSWER_MODE_");
  return name === "llm" ? t("ask.modeLlm") : name === "abstained" ? t("ask.modeAbstained") : t("ask.modeExtractive");
}

/** ABSTAINED: the nearest sources, listed as not sufficient; otherwise the
 * sentences whose citation failed verification (null when neither). */
function answerNotes(answer) {
  const nearest = answer.insufficientSources || [];
  const unsupported = answer.unsupportedSentences || [];
  return [
    nearest.length ? el("div", { class: "insufficient" },
      // plain words for the reader; the score and threshold (the score cut down, never rounded up to the
      // threshold: a trial read "0.500 < 0.500") in the tooltip
      el("p", { class: "dim", title: t("ask.insufficientScore", { a: (Math.floor((answer.answerability || 0) * 1000) / 1000).toFixed(3),
        th: score(answer.answerabilityThreshold || 0) }), text: t("ask.insufficient") }),
      el("ol", {}, nearest.map((c) => el("li", { lang: "zh", text: c.label || c.documentId })))) : null,
    unsupported.length ? el("div", { class: "unsupported" },
      el("p", { class: "dim", text: t("ask.unsupported", { n: unsupported.length }) }),
      el("ul", {}, unsupported.map((u) => el("li", { lang: "zh", text: u.sentence })))) : null,
  ];
}

function strategySection(answer) {
  const strategy = enumName(answer.strategy, "FALLBACK_STRATEGY_");
  const attempts = answer.attempts || [];
  return el("section", { class: "card strategy" },
    el("h3", {}, t("ask.strategy"), " ", strategy ? el("span", { class: "badge strategy-name", text: strategy }) : null,
      " ", el("span", { class: "badge", text: modeText(answer.mode) })),
    attempts.length ? el("table", { class: "attempts" },
      el("thead", {}, el("tr", {}, ["att.strategy", "att.outcome", "att.evidence", "att.results", "att.time"].map((k) => el("th", { scope: "col", text: t(k) })))),
      el("tbody", {}, attempts.map((a) => el("tr", { class: a.answered ? "answered" : "" },
        el("td", { class: "mono", text: enumName(a.strategy, "FALLBACK_STRATEGY_") }),
        el("td", { text: a.answered ? t("att.answered") : (a.reason || t("att.passed")) }),
        el("td", { class: "num", text: score(a.evidenceScore || 0) }), el("td", { class: "num", text: String(a.results || 0) }),
        el("td", { class: "num", text: ms(a.durationMs) }))))) : null,
    answer.invalidCitationsRemoved ? el("p", { class: "dim", text: t("ask.invalidRemoved", { n: answer.invalidCitationsRemoved }) }) : null,
    answer.fencesRemoved ? el("p", { class: "dim", text: t("ask.fencesRemoved", { n: answer.fencesRemoved }) }) : null);
}

function answerSection(answer, output, streamingText) {
  const search = answer ? answer.search || {} : {};
  const known = new Set(((answer && answer.citations) || []).map((c) => c.number));
  const body = el("div", { class: "answer-body" });
  if (answer) body.append(answerText(answer.answer, known, output));
  else body.append(el("div", { class: "answer-text streaming", lang: "zh", text: streamingText || "" }));
  const citations = answer && answer.citations && answer.citations.length
    ? el("ol", { class: "citations" }, answer.citations.map((c) => el("li", {},
      el("a", { class: "cite", href: `#src-${c.number}`, dataset: { n: String(c.number) },
        onclick: (e) => { e.preventDefault(); revealSource(output, c.number); } }, `[${c.number}]`), " ",
      el("span", { text: c.label || c.documentId }),
      c.caveat ? el("span", { class: "caveat", text: ` 【${c.caveat}】` }) : null)))
    : null;
  return { node: el("section", { class: "card answer" }, el("h3", { text: t("ask.answer") }), body, citations,
    ...(answer ? answerNotes(answer) : [])), search };
}

/** Renders a finished AnswerResponse (also DeepSearch's answer) below the timeline; streamed: the stage events seen. */
function renderAnswer(output, answer, slot, streamed = []) {
  const { node, search } = answerSection(answer, output);
  clear(slot).append(degradedBanner(search.degraded, [...streamed, ...(search.timings || [])]) || "", node, strategySection(answer),
    sourcesSection(sourcesOf(search.results, search.context, answer.citations, search.contextIds)), queryInfo(search.queryInfo) || "");
}

function deepIterations(reply) {
  return el("section", { class: "card" }, el("h3", { text: t("deep.iterations", { n: (reply.iterations || []).length }) }),
    el("p", {}, el("strong", { text: t("deep.stop") }), " ", reply.stopReason || "–"),
    el("ol", { class: "iterations" }, (reply.iterations || []).map((it) => el("li", {},
      el("p", {}, el("strong", { text: `#${it.number}` }), " ", t("deep.newChunks", { n: (it.newChunkIds || []).length }),
        ` · ${t("deep.growth")} ${score(it.growthRate || 0)} · ${ms(it.durationMs)}`),
      el("p", { class: "dim", lang: "zh", text: (it.queries || []).join(" | ") }),
      (it.proposed || []).length ? el("p", { class: "dim", lang: "zh" }, `${t("deep.proposed")} `,
        it.proposed.map((p) => `${p.text} (${score(p.score)})`).join(" · ")) : null))));
}

/** Where the collection last asked about is kept (localStorage). */
export const COLLECTION_STORAGE = "graphmesh.collection";

/** Wires the Ask form. Returns {submit(), setQuestion(text)} for voice input. */
export function setupAsk(root) {
  const form = root.querySelector("#ask-form");
  const box = root.querySelector("#ask-query");
  const topK = root.querySelector("#ask-topk");
  const collection = root.querySelector("#ask-collection");
  const output = root.querySelector("#ask-output");
  const errorBox = root.querySelector("#ask-error");
  const status = root.querySelector("#ask-status");
  let controller = null;
  let last = null;  // {mode, reply} of the last finished request, re-rendered on language change

  const setStatus = (key, vars) => { status.textContent = key ? t(key, vars) : ""; };
  // The collection last asked about comes back after a reload (a trial's reload sent questions to "default").
  try {
    const saved = localStorage.getItem(COLLECTION_STORAGE);
    if (saved && collectionName(collection.value) === "default") collection.value = saved;
  } catch { /* storage disabled */ }

  async function submit() {
    const mode = form.querySelector("input[name=mode]:checked").value;
    const query = normalizeQuestion(box.value);
    box.value = query;
    if (!query) {  // said here, in the page's language, not as the server's 400
      setStatus("ask.empty");
      box.focus();
      return;
    }
    const body = { query, topK: Number(topK.value || 0), collections: collectionNames(collection.value) };
    try { localStorage.setItem(COLLECTION_STORAGE, body.collections.join(", ")); } catch { /* storage disabled */ }
    if (controller) controller.abort();
    controller = new AbortController();
    const signal = controller.signal;
    hideError(errorBox);
    clear(output);
    last = null;
    output.dataset.state = "running";
    setStatus(mode === "answer" ? "ask.streaming" : "ask.working");
    try {
      if (mode === "answer") await runAnswer(body, signal);
      else if (mode === "search") await runSearch(body, signal);
      else await runDeep(body, signal);
      output.dataset.state = "done";
      setStatus("ask.done");
    } catch (err) {
      if (err.name === "AbortError") return;
      output.dataset.state = "error";
      setStatus("");
      showError(errorBox, err);
    }
  }

  async function runAnswer(body, signal) {
    const line = timeline();
    const slot = el("div", { class: "answer-slot" });
    const live = answerSection(null, output, "");
    // the answer above the stage timeline: on a phone, a trial's staff scrolled past ten stage rows to each answer
    output.append(slot, line.node);
    slot.append(live.node);
    const text = live.node.querySelector(".answer-text");
    let traceId = null;
    const stages = [];
    await stream(ROUTES.answer, body, {
      signal,
      onOpen: (id) => { traceId = id; },
      onEvent: (event) => {
        if (event.stage) {
          stages.push(event.stage);
          line.add(event.stage);
        } else if (typeof event.token === "string") text.textContent += event.token;
        else if (event.done) {
          renderAnswer(output, event.done, slot, stages);
          last = { mode: "answer", reply: event.done, stages };
        }
      },
    });
    if (!last) throw new Error(t("ask.noFinal"));
    output.append(traceLine(traceId));
  }

  async function runSearch(body, signal) {
    const { data, traceId } = await post(ROUTES.search, body, signal);
    last = { mode: "search", reply: data, traceId };
    renderSearch(data, traceId);
  }

  function renderSearch(data, traceId) {
    clear(output);
    const line = timeline();
    (data.timings || []).forEach(line.add);
    output.append(degradedBanner(data.degraded, data.timings) || "",
      sourcesSection(sourcesOf(data.results, data.context, [], data.contextIds)), line.node, queryInfo(data.queryInfo) || "",
      traceLine(traceId));
  }

  async function runDeep(body, signal) {
    const { data, traceId } = await post(ROUTES.deep, body, signal);
    last = { mode: "deep", reply: data, traceId };
    renderDeep(data, traceId);
  }

  function renderDeep(data, traceId) {
    clear(output);
    const answer = data.answer || {};
    const line = timeline();
    ((answer.search && answer.search.timings) || []).forEach(line.add);
    const slot = el("div", { class: "answer-slot" });
    output.append(slot, deepIterations(data), line.node, traceLine(traceId));
    renderAnswer(output, answer, slot);
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  box.addEventListener("keydown", (event) => {
    // Enter asks; Shift+Enter is a new line; an IME composing Chinese keeps its Enter.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      submit();
    }
  });
  onLanguage(() => {
    if (!last) return;
    if (last.mode === "search") renderSearch(last.reply, last.traceId);
    else if (last.mode === "deep") renderDeep(last.reply, last.traceId);
    else {
      const slot = output.querySelector(".answer-slot");
      if (slot) renderAnswer(output, last.reply, slot, last.stages);
    }
  });
  return {
    submit,
    setQuestion(text) { box.value = normalizeQuestion(text); },
    box,
  };
}
