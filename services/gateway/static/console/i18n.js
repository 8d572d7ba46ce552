// Interface text in English and Chinese. Static text is marked in
// index.html with data-i18n (text), data-i18n-placeholder and
// data-i18n-label (aria-label); panels call t() when they render and
// re-render on a language change (onLanguage).

const STORAGE = "graphmesh.lang";

const TEXT = {
  en: {
    "doc.title": "GraphMesh console",
    "skip": "Skip to content",
    "app.title": "console",
    "auth.label": "API key",
    "auth.help": "Only when the gateway requires one. Kept in this browser tab (sessionStorage), sent as Authorization: Bearer.",
    "auth.forget": "Forget key",
    "lang.switch": "中文",
    "lang.switchLabel": "切换到中文",
    "nav.label": "Console sections",
    "tab.ask": "Ask", "tab.entities": "Entities", "tab.library": "Library", "tab.stages": "Stages",
    "ask.question": "Question",
    "ask.placeholder": "e.g. 醉酒驾驶机动车会受到什么处罚？ (Enter to ask, Shift+Enter for a new line)",
    "ask.mode": "Mode", "mode.search": "Search", "mode.answer": "Answer (streamed)", "mode.deep": "DeepSearch",
    "ask.topk": "Results (top k)", "ask.collection": "Collection",
    "ask.submit": "Ask",
    "ask.mic": "Speak the question",
    "ask.streaming": "Streaming the answer…", "ask.working": "Working…", "ask.done": "Done.", "ask.empty": "Type a question first.",
    "ask.noFinal": "The stream ended without a final answer.",
    "ask.timeline": "Stages", "ask.answer": "Answer", "ask.citeLabel": "Source {n}",
    "ask.sources": "Sources ({n})", "ask.moreEvidence": "More evidence", "ask.evidence": "Evidence",
    "ask.degraded": "Degraded:", "ask.degradedHint": "failed or timed out; this response was built without it.",
    "ask.understanding": "Query understanding", "ask.strategy": "Answered by",
    "ask.modeLlm": "LLM", "ask.modeExtractive": "extractive (no LLM)", "ask.modeAbstained": "no answer (evidence insufficient)",
    "ask.insufficient": "Nearest sources (not sufficient to answer; for reference only):",
    "ask.insufficientScore": "answerability {a} < {th}",
    "ask.unsupported": "{n} sentence(s) not supported by their cited source (mark removed)",
    "ask.invalidRemoved": "{n} citation(s) pointing at no source were removed.",
    "ask.fencesRemoved": "{n} code fence(s) were stripped from the LLM's answer.",
    "qi.normalized": "Normalised", "qi.type": "Question type", "qi.profile": "Profile", "qi.keywords": "Keywords", "qi.expansions": "Expansions",
    "att.strategy": "Strategy", "att.outcome": "Outcome", "att.evidence": "Evidence", "att.results": "Results", "att.time": "Time",
    "att.answered": "answered", "att.passed": "passed over",
    "src.channels": "Channel scores", "src.channel": "Channel", "src.score": "Score", "src.rank": "Rank", "src.evidence": "Evidence",
    "src.cited": "cited", "src.boosted": "boosted (same document)", "src.truncated": "truncated in the context",
    "src.whole": "whole in the context", "src.notPacked": "not in the context", "src.fused": "fused", "src.headings": "Heading path",
    "status.ok": "ok", "status.skipped": "skipped", "status.degraded": "degraded", "status.unspecified": "–",
    "deep.iterations": "Iterations ({n})", "deep.stop": "Stopped:", "deep.newChunks": "{n} new chunks", "deep.growth": "growth",
    "deep.proposed": "Proposed:",
    "ent.query": "Entity query", "ent.placeholder": "e.g. 马玲薯, 土豆, 蔬菜有哪些", "ent.submit": "Search entities",
    "ent.mic": "Speak the entity query",
    "ent.gate": "Normalisation", "ent.rewrittenTo": "rewritten to", "ent.kept": "Kept as asked:",
    "ent.gateReason": "Gate reason", "ent.matchScore": "Match confidence", "ent.route": "Route", "ent.routeConfidence": "confidence",
    "ent.summaries": "Category summaries", "ent.members": "{n} members", "ent.topMembers": "Most connected:",
    "ent.results": "Entities ({n})", "ent.none": "No library entity matched.", "ent.score": "score",
    "ent.aliases": "Aliases:", "ent.evidence": "Evidence", "ent.matched": "Matched", "ent.relation": "Relation",
    "ent.breakdown": "Score breakdown",
    "rel.direct": "direct", "rel.parent": "parent / child", "rel.same_object": "same object", "rel.same_property": "same property",
    "rel.same_category": "same category", "rel.attribute": "attribute", "rel.category_member": "category member", "rel.unspecified": "–",
    "lib.collectionsTitle": "Collections", "lib.refresh": "Refresh",
    "lib.showDocuments": "Show its documents", "lib.documentsOf": "Documents in {collection}", "lib.delete": "Delete",
    "lib.deleteConfirm": "Delete {id} from this collection? Its text will no longer be searched or quoted.",
    "lib.deleted": "Deleted {id}.", "lib.noDocuments": "No documents in this collection.",
    "lib.moreDocuments": "Only the first {n} are listed.",
    "lib.collection": "Collection", "lib.documents": "Documents", "lib.chunks": "Chunks", "lib.entities": "Entities", "lib.triples": "Triples",
    "lib.noCollections": "No collection yet: the first ingest creates one.",
    "lib.listFailed": "The collections could not be listed (GET /v1/collections):",
    "lib.ingestTitle": "Ingest files",
    "lib.collectionLabel": "Into collection",
    "lib.collectionHelp": "A letter or digit, then up to 62 letters, digits, _ or -; created by its first ingest.",
    "lib.drop": "Drop files here: documents (.txt, .md, .html, .pdf, .docx, .csv; one document each) or JSONL records (.jsonl, .jsonl.gz). Or choose them:",
    "lib.choose": "Choose files", "lib.kindLabel": "JSONL records are",
    "lib.kind.auto": "detected from the first record", "lib.kind.documents": "documents", "lib.kind.entities": "entities", "lib.kind.triples": "triples",
    "lib.reading": "Reading {name}…", "lib.sending": "Ingesting {name} as {kind}…", "lib.done": "Ingested {name}.",
    "lib.sendingFiles": "Ingesting {n} file(s) into {collection}…",
    "lib.filesDone": "{n} file(s) sent: {stored} stored, {unchanged} unchanged, {failed} failed.",
    "lib.counts": "received {received}, stored {stored}, unchanged {unchanged}, chunks {chunks}",
    "lib.failures": "{n} record(s) failed",
    "lib.filesInto": "{n} file(s) into",
    "lib.fileCounts": "stored {stored}, unchanged {unchanged}, chunks {chunks}",
    "lib.file.stored": "stored", "lib.file.unchanged": "unchanged", "lib.file.failed": "failed",
    "lib.pages": "{n} page(s)", "lib.chunksN": "{n} chunk(s)",
    "lib.replaced": "Replaced the version stored under this id.",
    "lib.duplicateOf": "Same text as {id}, already in this collection: both are stored and both will be found; delete one to keep a single copy.",
    "lib.sameTitleAs": "Same title as {ids}, with other text: two versions? Both answer, each with its own figures; delete the one no longer in force.",
    "lib.resultsTitle": "Ingested in this session",
    "lib.asImport": "Run as an import (progress under Imports, can be cancelled)",
    "lib.asImportHelp": "Sent to POST /v1/documents:import as a long-running operation; uploads over 8 MiB always are.",
    "lib.importStarted": "import started:", "lib.importsStarted": "Import of {name} started: its progress is under Imports.",
    "lib.filesN": "{n} file(s)",
    "imp.title": "Imports", "imp.refresh": "Refresh",
    "imp.intro": "Long-running imports (GET /v1/operations): running ones first, then the last 5 finished; refreshed every second while one runs.",
    "imp.none": "No import yet.",
    "imp.state.running": "running", "imp.state.cancelling": "cancelling", "imp.state.done": "done",
    "imp.state.cancelled": "cancelled", "imp.state.failed": "failed", "imp.state.partial": "done, some failed",
    "imp.counts": "{stored} stored, {unchanged} unchanged, {failed} failed of {total}",
    "imp.line": "line {n}", "imp.more": "… and {n} more (graphmesh operations get shows them all)",
    "imp.started": "started {time}", "imp.progressLabel": "Progress of {name}",
    "imp.cancel": "Cancel", "imp.cancelLabel": "Cancel {name}",
    "st.title": "Per-stage latency and error rates", "st.refresh": "Refresh",
    "st.intro": "From this gateway's own Prometheus metrics (GET /v1/stages:summary): latency percentiles estimated from histogram buckets.",
    "st.sinceStart": "Since the gateway started", "st.window": "Last {s} s", "st.updated": "updated {time}",
    "st.stagesTitle": "Pipeline stages", "st.rpcsTitle": "RPCs",
    "st.errorsAre": "Errors: UNKNOWN, INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED, DATA_LOSS, UNIMPLEMENTED (not the caller's own mistakes).",
    "st.stage": "Stage", "st.count": "Count", "st.p50": "p50", "st.p95": "p95", "st.mean": "Mean", "st.degraded": "Degraded",
    "st.side": "Side", "st.method": "Method", "st.errors": "Errors", "st.codes": "Codes",
    "st.side.server": "served", "st.side.client": "called",
    "st.noStages": "No stage has run in this window.", "st.noRpcs": "No RPC in this window.",
    "error.title": "The server answered with an error:",
    "error.needKey": "This gateway requires an API key: enter it above.",
    "error.rateLimited": "Rate limit reached: wait and try again.",
    "voice.error": "Voice input failed: {error}",
    "trace": "trace",
  },
  zh: {
    "doc.title": "GraphMesh 控制台",
    "skip": "跳到正文",
    "app.title": "控制台",
    "auth.label": "API 密钥",
    "auth.help": "仅当网关要求时填写。只保存在本浏览器标签页（sessionStorage），以 Authorization: Bearer 发送。",
    "auth.forget": "清除密钥",
    "lang.switch": "English",
    "lang.switchLabel": "Switch to English",
    "nav.label": "控制台分区",
    "tab.ask": "问答", "tab.entities": "实体", "tab.library": "资料库", "tab.stages": "阶段",
    "ask.question": "问题",
    "ask.placeholder": "例如：醉酒驾驶机动车会受到什么处罚？（回车提问，Shift+回车换行）",
    "ask.mode": "模式", "mode.search": "检索", "mode.answer": "回答（流式）", "mode.deep": "深度检索",
    "ask.topk": "结果数（top k）", "ask.collection": "集合",
    "ask.submit": "提问",
    "ask.mic": "语音提问",
    "ask.streaming": "正在流式生成回答…", "ask.working": "处理中…", "ask.done": "完成。", "ask.empty": "请先输入问题。",
    "ask.noFinal": "流已结束，但没有收到最终回答。",
    "ask.timeline": "阶段", "ask.answer": "回答", "ask.citeLabel": "来源 {n}",
    "ask.sources": "来源（{n}）", "ask.moreEvidence": "更多证据", "ask.evidence": "证据",
    "ask.degraded": "降级：", "ask.degradedHint": "调用失败或超时；本次结果是在缺少它的情况下得出的。",
    "ask.understanding": "查询理解", "ask.strategy": "回答策略",
    "ask.modeLlm": "大模型生成", "ask.modeExtractive": "抽取式（未使用大模型）", "ask.modeAbstained": "不作回答（资料不足）",
    "ask.insufficient": "最接近的资料（不足以回答，仅供参考）：",
    "ask.insufficientScore": "可答性 {a} < {th}",
    "ask.unsupported": "{n} 句在所引资料中找不到依据（已去除引用标记）",
    "ask.invalidRemoved": "已删除 {n} 个没有对应来源的引用。",
    "ask.fencesRemoved": "已去除大模型回答中的 {n} 处代码块标记。",
    "qi.normalized": "规范化查询", "qi.type": "问题类型", "qi.profile": "检索配置", "qi.keywords": "关键词", "qi.expansions": "扩展词",
    "att.strategy": "策略", "att.outcome": "结果", "att.evidence": "证据分", "att.results": "结果数", "att.time": "耗时",
    "att.answered": "已采用", "att.passed": "未采用",
    "src.channels": "各通道得分", "src.channel": "通道", "src.score": "得分", "src.rank": "排名", "src.evidence": "依据",
    "src.cited": "已引用", "src.boosted": "同文档加权", "src.truncated": "上下文中被截断",
    "src.whole": "完整放入上下文", "src.notPacked": "未放入上下文", "src.fused": "融合分", "src.headings": "标题路径",
    "status.ok": "成功", "status.skipped": "跳过", "status.degraded": "降级", "status.unspecified": "–",
    "deep.iterations": "迭代（{n}）", "deep.stop": "停止原因：", "deep.newChunks": "新增 {n} 个片段", "deep.growth": "增长率",
    "deep.proposed": "候选子查询：",
    "ent.query": "实体查询", "ent.placeholder": "例如：马玲薯、土豆、蔬菜有哪些", "ent.submit": "搜索实体",
    "ent.mic": "语音输入实体查询",
    "ent.gate": "规范化", "ent.rewrittenTo": "改写为", "ent.kept": "保持原样：",
    "ent.gateReason": "门控原因", "ent.matchScore": "匹配置信度", "ent.route": "路由", "ent.routeConfidence": "置信度",
    "ent.summaries": "类别概览", "ent.members": "{n} 个成员", "ent.topMembers": "关联最多：",
    "ent.results": "实体（{n}）", "ent.none": "没有匹配的库内实体。", "ent.score": "得分",
    "ent.aliases": "别名：", "ent.evidence": "证据", "ent.matched": "匹配内容", "ent.relation": "关系",
    "ent.breakdown": "得分构成",
    "rel.direct": "直接命中", "rel.parent": "上下位", "rel.same_object": "同对象", "rel.same_property": "同属性",
    "rel.same_category": "同类别", "rel.attribute": "属性", "rel.category_member": "类别成员", "rel.unspecified": "–",
    "lib.collectionsTitle": "集合", "lib.refresh": "刷新",
    "lib.showDocuments": "查看其中的文档", "lib.documentsOf": "集合 {collection} 中的文档", "lib.delete": "删除",
    "lib.deleteConfirm": "从本集合删除 {id}？删除后它的内容不会再被检索或引用。",
    "lib.deleted": "已删除 {id}。", "lib.noDocuments": "本集合中没有文档。",
    "lib.moreDocuments": "只列出前 {n} 篇。",
    "lib.collection": "集合", "lib.documents": "文档", "lib.chunks": "片段", "lib.entities": "实体", "lib.triples": "三元组",
    "lib.noCollections": "还没有集合：第一次导入时自动创建。",
    "lib.listFailed": "无法列出集合（GET /v1/collections）：",
    "lib.ingestTitle": "导入文件",
    "lib.collectionLabel": "导入到集合",
    "lib.collectionHelp": "以字母或数字开头，其后最多 62 个字母、数字、_ 或 -；第一次导入时创建。",
    "lib.drop": "把文件拖到这里：文档（.txt、.md、.html、.pdf、.docx、.csv，每个文件一篇文档）或 JSONL 记录（.jsonl、.jsonl.gz）。也可以选择文件：",
    "lib.choose": "选择文件", "lib.kindLabel": "JSONL 记录类型",
    "lib.kind.auto": "根据第一条记录判断", "lib.kind.documents": "文档", "lib.kind.entities": "实体", "lib.kind.triples": "三元组",
    "lib.reading": "正在读取 {name}…", "lib.sending": "正在以{kind}导入 {name}…", "lib.done": "已导入 {name}。",
    "lib.sendingFiles": "正在把 {n} 个文件导入集合 {collection}…",
    "lib.filesDone": "已发送 {n} 个文件：写入 {stored}，未变 {unchanged}，失败 {failed}。",
    "lib.counts": "收到 {received}，写入 {stored}，未变 {unchanged}，片段 {chunks}",
    "lib.failures": "{n} 条记录失败",
    "lib.filesInto": "{n} 个文件，导入集合",
    "lib.fileCounts": "写入 {stored}，未变 {unchanged}，片段 {chunks}",
    "lib.file.stored": "已写入", "lib.file.unchanged": "未变", "lib.file.failed": "失败",
    "lib.pages": "{n} 页", "lib.chunksN": "{n} 个片段",
    "lib.replaced": "已替换此前以同一 id 存储的版本。",
    "lib.duplicateOf": "与本集合中的 {id} 文本相同：两份都已写入，检索时都会出现；只想保留一份请删除其中之一。",
    "lib.sameTitleAs": "与本集合中的 {ids} 标题相同、内容不同：是同一份文件的两个版本吗？两份都会被用来回答，各给各的数字；请删除已不再适用的那一份。",
    "lib.resultsTitle": "本次会话的导入",
    "lib.asImport": "作为导入任务运行（进度见“导入任务”，可取消）",
    "lib.asImportHelp": "以长时运行操作发送到 POST /v1/documents:import；超过 8 MiB 的上传总是如此。",
    "lib.importStarted": "导入任务已开始：", "lib.importsStarted": "{name} 的导入任务已开始：进度见“导入任务”。",
    "lib.filesN": "{n} 个文件",
    "imp.title": "导入任务", "imp.refresh": "刷新",
    "imp.intro": "长时运行的导入（GET /v1/operations）：先列运行中的，再列最近完成的 5 个；有任务运行时每秒刷新。",
    "imp.none": "还没有导入任务。",
    "imp.state.running": "运行中", "imp.state.cancelling": "正在取消", "imp.state.done": "完成",
    "imp.state.cancelled": "已取消", "imp.state.failed": "失败", "imp.state.partial": "完成，部分失败",
    "imp.counts": "共 {total}：写入 {stored}，未变 {unchanged}，失败 {failed}",
    "imp.line": "第 {n} 行", "imp.more": "… 另有 {n} 条（graphmesh operations get 可看全部）",
    "imp.started": "开始于 {time}", "imp.progressLabel": "{name} 的进度",
    "imp.cancel": "取消", "imp.cancelLabel": "取消 {name}",
    "st.title": "各阶段延迟与错误率", "st.refresh": "刷新",
    "st.intro": "来自本网关自身的 Prometheus 指标（GET /v1/stages:summary）；分位数由直方图分桶估算。",
    "st.sinceStart": "自网关启动以来", "st.window": "最近 {s} 秒", "st.updated": "更新于 {time}",
    "st.stagesTitle": "流水线阶段", "st.rpcsTitle": "RPC",
    "st.errorsAre": "错误指 UNKNOWN、INTERNAL、UNAVAILABLE、DEADLINE_EXCEEDED、DATA_LOSS、UNIMPLEMENTED（不含调用方自身的错误）。",
    "st.stage": "阶段", "st.count": "次数", "st.p50": "p50", "st.p95": "p95", "st.mean": "平均", "st.degraded": "降级",
    "st.side": "方向", "st.method": "方法", "st.errors": "错误", "st.codes": "状态码",
    "st.side.server": "提供", "st.side.client": "调用",
    "st.noStages": "此时间窗内没有运行任何阶段。", "st.noRpcs": "此时间窗内没有 RPC。",
    "error.title": "服务器返回错误：",
    "error.needKey": "此网关需要 API 密钥：请在上方填写。",
    "error.rateLimited": "已达到速率限制：请稍后再试。",
    "voice.error": "语音输入失败：{error}",
    "trace": "追踪 ID",
  },
};

let language = initial();
const listeners = [];

function initial() {
  try {
    const saved = localStorage.getItem(STORAGE);
    if (saved && TEXT[saved]) return saved;
  } catch { /* storage disabled */ }
  return (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
}

/** The interface language: "en" or "zh". */
export function currentLanguage() {
  return language;
}

/** Text for key in the current language, with {name} placeholders filled from vars. */
export function t(key, vars = {}) {
  const text = TEXT[language][key] ?? TEXT.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => (name in vars ? String(vars[name]) : `{${name}}`));
}

/** Calls fn after every language change. */
export function onLanguage(fn) {
  listeners.push(fn);
}

/** Applies the language to the static text of root (data-i18n attributes). */
export function applyLanguage(root = document) {
  document.documentElement.lang = language === "zh" ? "zh-CN" : "en";
  document.title = t("doc.title");
  root.querySelectorAll("[data-i18n]").forEach((node) => { node.textContent = t(node.dataset.i18n); });
  root.querySelectorAll("[data-i18n-placeholder]").forEach((node) => { node.placeholder = t(node.dataset.i18nPlaceholder); });
  root.querySelectorAll("[data-i18n-label]").forEach((node) => { node.setAttribute("aria-label", t(node.dataset.i18nLabel)); });
  root.querySelectorAll("[data-i18n-title]").forEach((node) => { node.title = t(node.dataset.i18nTitle); });
}

/** Switches to lang ("en" / "zh"), remembers it, re-applies static text and tells the panels. */
export function setLanguage(lang) {
  if (!TEXT[lang]) return;
  language = lang;
  try { localStorage.setItem(STORAGE, lang); } catch { /* storage disabled */ }
  applyLanguage();
  listeners.forEach((fn) => fn(lang));
}

/** The keys of one language (for checks that both languages have every key). */
export function keys(lang) {
  return Object.keys(TEXT[lang] || {});
}
