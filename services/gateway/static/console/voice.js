// Voice input through the browser's Web Speech API, where it has one
// (SpeechRecognition / webkitSpeechRecognition). Without it the microphone
// buttons stay hidden. The final transcript goes into the same question box
// and is asked the same way as typed text (same normalisation).
import { currentLanguage, t } from "./i18n.js";

/** The browser's SpeechRecognition constructor, or null. */
export function recognizer() {
  return window.SpeechRecognition || window.webkitSpeechRecognition || null;
}

/**
 * Attaches voice input to button for a form target {box, setQuestion, submit}.
 * Interim results show in the box; the final one is set and submitted.
 */
export function attachVoice(button, target) {
  const Recognition = recognizer();
  if (!Recognition) {
    button.hidden = true;
    return;
  }
  button.hidden = false;
  let active = null;
  button.addEventListener("click", () => {
    if (active) { active.stop(); return; }
    const rec = new Recognition();
    rec.lang = currentLanguage() === "zh" ? "zh-CN" : "en-US";
    rec.interimResults = true;
    rec.maxAlternatives = 1;
    active = rec;
    button.setAttribute("aria-pressed", "true");
    button.classList.add("listening");
    rec.onresult = (event) => {
      let text = "";
      let final = false;
      for (let i = 0; i < event.results.length; i += 1) {
        text += event.results[i][0].transcript;
        final = final || event.results[i].isFinal;
      }
      target.setQuestion(text);
      if (final) { rec.stop(); target.submit(); }
    };
    rec.onerror = (event) => { target.box.setAttribute("placeholder", t("voice.error", { error: event.error || "" })); };
    rec.onend = () => {
      active = null;
      button.setAttribute("aria-pressed", "false");
      button.classList.remove("listening");
    };
    rec.start();
  });
}
