// Entities panel: POST /v1/entities:search. Shows the normalisation gate
// (a rewrite such as 马玲薯 → 马铃薯, with its reason and confidence), the
// route, category summaries (global route), and for each library entity its
// category, definition, the evidence that matched, the relation that brought
// it in and its score breakdown.
import { post } from "./api.js";
import { clear, collectionNames, el, enumName, ms, percent, score } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { hideError, showError, traceLine } from "./feedback.js";
import { degradedServices, normalizeQuestion } from "./ask.js";

/** The best expander.match evidence of the top entity: how the rewrite was matched ({method, score}) or null. */
export function rewriteMatch(reply) {
  for (const entity of reply.entities || []) {
    const match = (entity.evidence || []).filter((e) => e.channel === "expander.match")
      .sort((a, b) => (b.score || 0) - (a.score || 0))[0];
    if (match) {
      const [method] = String(match.matched || "").split(":");
      return { method, score: match.score || 0, entity: entity.name };
    }
  }
  return null;
}

function gateSection(query, reply) {
  const match = reply.rewritten ? rewriteMatch(reply) : null;
  const route = reply.route || "none";
  return el("section", { class: `card gate${reply.rewritten ? " rewritten" : ""}` },
    el("h3", { text: t("ent.gate") }),
    reply.rewritten
      ? el("p", { class: "rewrite", lang: "zh" },
        el("span", { class: "rewrite-from", text: query }), el("span", { class: "arrow", "aria-hidden": "true", text: " → " }),
        el("span", { class: "sr-only", text: ` ${t("ent.rewrittenTo")} ` }), el("span", { class: "rewrite-to", text: reply.normalizedQuery }))
      : el("p", { class: "kept", lang: "zh" }, t("ent.kept"), " ", el("span", { class: "rewrite-to", text: reply.normalizedQuery || query })),
    el("dl", { class: "facts" },
      el("dt", { text: t("ent.gateReason") }), el("dd", { class: "mono gate-reason", text: reply.gateReason || "–" }),
      match ? [el("dt", { text: t("ent.matchScore") }), el("dd", { class: "match-score", text: `${score(match.score)} (${match.method})` })] : null,
      el("dt", { text: t("ent.route") }), el("dd", { class: "route" }, el("span", { class: "badge", text: route }),
        " ", t("ent.routeConfidence"), " ", el("span", { class: "route-confidence", text: percent(reply.routeConfidence || 0) }))));
}

function summaries(list) {
  if (!list || !list.length) return null;
  return el("section", { class: "card summaries" }, el("h3", { text: t("ent.summaries") }),
    list.map((s) => el("article", { class: "summary", lang: "zh" },
      el("h4", {}, s.category, " ", el("span", { class: "dim", text: t("ent.members", { n: s.members || 0 }) })),
      (s.topMembers || []).length ? el("p", {}, el("strong", { text: t("ent.topMembers") }), " ", s.topMembers.join("、")) : null,
      (s.sharedFacts || []).length ? el("ul", {}, s.sharedFacts.map((f) => el("li", { text: `${f.predicate}：${f.value} (${t("ent.members", { n: f.members })})` }))) : null)));
}

function bar(share) {
  const node = el("span", { class: "bar" });
  node.style.width = `${Math.round(share * 100)}%`;  // CSSOM, allowed by the page's style-src 'self'
  return node;
}

function breakdown(parts) {
  const entries = Object.entries(parts || {}).filter(([, v]) => v).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
  const max = Math.max(0.0001, ...entries.map(([, v]) => Math.abs(v)));
  return el("table", { class: "breakdown" }, el("caption", { text: t("ent.breakdown") }),
    el("tbody", {}, entries.map(([name, value]) => el("tr", { class: value < 0 ? "negative" : "", dataset: { part: name } },
      el("th", { scope: "row", class: "mono", text: name }),
      el("td", { class: "bar-cell" }, bar(Math.abs(value) / max)),
      el("td", { class: "num", text: score(value) })))));
}

function entityCard(entity, index) {
  const relation = enumName(entity.relation, "ENTITY_RELATION_");
  return el("li", { class: "entity", dataset: { name: entity.name } },
    el("header", {},
      el("span", { class: "rank", text: `${index + 1}` }),
      el("h4", { lang: "zh", text: entity.name }),
      entity.category ? el("span", { class: "badge category", lang: "zh", text: entity.category }) : null,
      el("span", { class: "badge relation", text: t(`rel.${relation || "unspecified"}`) }),
      el("span", { class: "entity-score", text: `${t("ent.score")} ${score(entity.score)}` })),
    entity.definition ? el("p", { class: "definition", lang: "zh", text: entity.definition }) : null,
    (entity.aliases || []).length ? el("p", { class: "dim", lang: "zh" }, `${t("ent.aliases")} `, entity.aliases.join("、")) : null,
    el("div", { class: "entity-grid" },
      el("table", { class: "evidence" }, el("caption", { text: t("ent.evidence") }),
        el("thead", {}, el("tr", {}, ["src.channel", "src.score", "ent.matched", "ent.relation"].map((k) => el("th", { scope: "col", text: t(k) })))),
        el("tbody", {}, (entity.evidence || []).map((e) => el("tr", {},
          el("td", { class: "mono", text: e.channel }), el("td", { class: "num", text: score(e.score) }),
          el("td", { lang: "zh", text: e.matched || "" }), el("td", { text: t(`rel.${enumName(e.relation, "ENTITY_RELATION_") || "unspecified"}`) }))))),
      breakdown(entity.scoreBreakdown)));
}

function render(output, query, reply, traceId) {
  clear(output);
  const degraded = degradedServices(reply.degraded, reply.timings);
  output.append(
    degraded.length ? el("div", { class: "degraded-banner", role: "status" }, el("strong", { text: t("ask.degraded") }), " ",
      degraded.map((d) => el("span", { class: "badge status-degraded", dataset: { service: d.service }, title: d.detail, text: d.service })),
      " ", t("ask.degradedHint")) : "",
    gateSection(query, reply),
    summaries(reply.categorySummaries) || "",
    el("section", { class: "card" }, el("h3", { text: t("ent.results", { n: (reply.entities || []).length }) }),
      (reply.entities || []).length ? el("ol", { class: "entity-list" }, reply.entities.map(entityCard)) : el("p", { text: t("ent.none") })),
    el("p", { class: "dim timings" }, (reply.timings || []).map((s) => `${s.stage} ${s.status === "STAGE_STATUS_SKIPPED" ? t("status.skipped") : ms(s.durationMs)}`).join(" · ")),
    traceLine(traceId));
}

/** Wires the Entities form. Returns {submit, setQuestion} for voice input. */
export function setupEntities(root) {
  const form = root.querySelector("#ent-form");
  const box = root.querySelector("#ent-query");
  const topK = root.querySelector("#ent-topk");
  const collection = root.querySelector("#ent-collection");
  const output = root.querySelector("#ent-output");
  const errorBox = root.querySelector("#ent-error");
  let last = null;

  async function submit() {
    const query = normalizeQuestion(box.value);
    box.value = query;
    hideError(errorBox);
    clear(output);
    output.dataset.state = "running";
    try {
      const { data, traceId } = await post("./v1/entities:search",
        { query, topK: Number(topK.value || 0), collections: collectionNames(collection.value) });
      last = { query, data, traceId };
      render(output, query, data, traceId);
      output.dataset.state = "done";
    } catch (err) {
      output.dataset.state = "error";
      showError(errorBox, err);
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  onLanguage(() => { if (last) render(output, last.query, last.data, last.traceId); });
  return { submit, setQuestion(text) { box.value = normalizeQuestion(text); }, box };
}
