// GraphMesh console: a single page over the gateway's public REST routes.
// Plain ES modules, no build step.
import { apiKey, setApiKey } from "./api.js";
import { setupAsk } from "./ask.js";
import { setupEntities } from "./entities.js";
import { applyLanguage, currentLanguage, setLanguage } from "./i18n.js";
import { setupLibrary } from "./library.js";
import { setupStages } from "./stages.js";
import { attachVoice } from "./voice.js";

function setupKey() {
  const field = document.getElementById("api-key");
  field.value = apiKey();
  field.addEventListener("input", () => setApiKey(field.value));
  document.getElementById("api-key-forget").addEventListener("click", () => {
    field.value = "";
    setApiKey("");
    field.focus();
  });
  document.addEventListener("graphmesh:unauthenticated", () => field.classList.add("needed"));
  field.addEventListener("input", () => field.classList.remove("needed"));
}

/** Tabs per the WAI-ARIA tabs pattern: arrow keys, Home and End move between tabs; Enter/Space/click select. */
function setupTabs(onShow) {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  const select = (tab, focus = true) => {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
    onShow(tab.id.replace("tab-", ""));
  };
  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (event) => {
      const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 };
      if (!(event.key in moves)) return;
      event.preventDefault();
      select(tabs[(moves[event.key] + tabs.length) % tabs.length]);
    });
  });
}

function main() {
  applyLanguage();
  setupKey();
  const root = document;
  const ask = setupAsk(root);
  const entities = setupEntities(root);
  const library = setupLibrary(root);
  const stages = setupStages(root);
  attachVoice(document.getElementById("ask-mic"), ask);
  attachVoice(document.getElementById("ent-mic"), entities);
  setupTabs((name) => {
    if (name === "stages") stages.start();
    else stages.stop();
    if (name === "library") library.show();
    else library.hide();
  });
  document.getElementById("lang").addEventListener("click", () => setLanguage(currentLanguage() === "zh" ? "en" : "zh"));
  document.body.dataset.ready = "true";
}

main();
