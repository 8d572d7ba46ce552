// Stages panel: per-stage latency (p50 / p95) and recent error rates from
// the gateway's own metrics (GET /v1/stages:summary), for a local user
// without Grafana. Refreshes every 10 s while the panel is shown.
import { get } from "./api.js";
import { clear, el, ms, percent } from "./dom.js";
import { onLanguage, t } from "./i18n.js";
import { hideError, showError } from "./feedback.js";

const REFRESH_MS = 10000;

function stageTable(rows) {
  if (!rows.length) return el("p", { class: "dim", text: t("st.noStages") });
  return el("table", { class: "stages" },
    el("thead", {}, el("tr", {}, ["st.stage", "st.count", "st.p50", "st.p95", "st.mean", "st.degraded"].map((k) => el("th", { scope: "col", text: t(k) })))),
    el("tbody", {}, rows.map((r) => el("tr", { class: r.degraded ? "has-errors" : "", dataset: { stage: r.stage } },
      el("th", { scope: "row", class: "mono", text: r.stage }), el("td", { class: "num", text: String(r.count) }),
      el("td", { class: "num p50", text: ms(r.p50Ms) }), el("td", { class: "num p95", text: ms(r.p95Ms) }),
      el("td", { class: "num", text: ms(r.meanMs) }),
      el("td", { class: "num", text: `${percent(r.degradedRate)} (${r.degraded})` })))));
}

function rpcTable(rows) {
  if (!rows.length) return el("p", { class: "dim", text: t("st.noRpcs") });
  return el("table", { class: "rpcs" },
    el("thead", {}, el("tr", {}, ["st.side", "st.method", "st.count", "st.errors", "st.codes"].map((k) => el("th", { scope: "col", text: t(k) })))),
    el("tbody", {}, rows.map((r) => el("tr", { class: r.errors ? "has-errors" : "" },
      el("td", { text: t(`st.side.${r.side}`) }),
      el("th", { scope: "row", class: "mono", text: `${r.service.split(".").slice(-1)[0]}/${r.method}` }),
      el("td", { class: "num", text: String(r.count) }),
      el("td", { class: "num", text: `${percent(r.errorRate)} (${r.errors})` }),
      el("td", { class: "mono dim", text: Object.entries(r.codes).map(([c, n]) => `${c} ${n}`).join(", ") })))));
}

function render(output, data) {
  clear(output);
  const view = data.recent && (data.recent.stages.length || data.recent.rpcs.length) ? data.recent : data.sinceStart;
  const label = view.windowSeconds == null ? t("st.sinceStart") : t("st.window", { s: Math.round(view.windowSeconds) });
  output.append(
    el("p", { class: "window" }, el("strong", { text: label }), ` · ${t("st.updated", { time: new Date().toLocaleTimeString() })}`),
    el("section", { class: "card" }, el("h3", { text: t("st.stagesTitle") }), stageTable(view.stages)),
    el("section", { class: "card" }, el("h3", { text: t("st.rpcsTitle") }), el("p", { class: "dim", text: t("st.errorsAre") }), rpcTable(view.rpcs)));
}

/** Wires the Stages panel; start()/stop() are called when it is shown/hidden. */
export function setupStages(root) {
  const output = root.querySelector("#st-output");
  const errorBox = root.querySelector("#st-error");
  const button = root.querySelector("#st-refresh");
  let timer = null;
  let last = null;

  async function refresh() {
    try {
      const { data } = await get("./v1/stages:summary");
      last = data;
      hideError(errorBox);
      render(output, data);
      output.dataset.state = "done";
    } catch (err) {
      output.dataset.state = "error";
      showError(errorBox, err);
    }
  }

  button.addEventListener("click", refresh);
  onLanguage(() => { if (last) render(output, last); });
  return {
    start() { refresh(); if (!timer) timer = setInterval(refresh, REFRESH_MS); },
    stop() { clearInterval(timer); timer = null; },
  };
}
