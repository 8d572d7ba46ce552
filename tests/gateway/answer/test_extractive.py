"""The extractive answer (services/gateway/answer/extractive.py and the
pieces it may quote, services/gateway/answer/quotable.py): which pieces of a
source are quoted for a question, and how they are put together."""
import pytest
from services.gateway.answer import extractive as generation
from services.gateway.answer import quotable as pieces
from services.gateway.answer.extractive import EXTRACTIVE_LABEL, LIST_MAX_CHARS, extractive_answer

pytestmark = pytest.mark.unit

def test_extractive_answer_quotes_whole_sentences_with_citations():
    answer = extractive_answer(["第一句。第二句。", "另一条。"], max_chars_per_source=5)
    lines = answer.splitlines()
    assert lines[0] == EXTRACTIVE_LABEL
    assert lines[1] == "第一句。 [1]"
    assert lines[2] == "另一条。 [2]"


def test_extractive_answer_picks_the_sentence_that_answers_and_skips_list_items():
    art44 = ("有下列情形之一的，专利权在期限届满前终止：（一）没有按照规定缴纳年费的；"
             "（二）专利权人以书面声明放弃其专利权的。专利权在期限届满前终止的，由国务院专利行政部门登记和公告。")
    art42 = "自发明专利申请日起满四年的，可以请求补偿。发明专利权的期限为二十年，实用新型专利权的期限为十年。"
    answer = extractive_answer([art44, art42], "发明专利权的期限是多久？", max_sentences_per_source=1)
    lines = answer.splitlines()
    quoted = "".join(lines[1:])
    assert "（一）" not in quoted and "：" not in quoted  # no list items, no lead-in
    assert lines[2] == "发明专利权的期限为二十年，实用新型专利权的期限为十年。 [2]"  # not the leading sentence


def test_questions_and_passages_in_either_form_of_chinese_pick_the_answering_sentence():
    simplified_text = "首次申领居住证免收工本费。居住证由派出所受理。补办居住证需要到派出所办理。"
    traditional_text = "首次申領居住證免收工本費。居住證由派出所受理。補辦居住證需要到派出所辦理。"
    asked = extractive_answer([simplified_text], "補辦居住證去哪裡辦？", max_sentences_per_source=1)
    assert asked.splitlines()[1:] == ["补办居住证需要到派出所办理。 [1]"]
    stored = extractive_answer([traditional_text], "补办居住证去哪里办？", max_sentences_per_source=1)
    assert stored.splitlines()[1:] == ["補辦居住證需要到派出所辦理。 [1]"]  # quoted as stored


def _quote(answer: str) -> str:
    return answer.split("\n", 1)[1]


def test_a_comment_line_is_quoted_with_the_command_it_describes():
    text = ("# 处理单个文件\npython scripts/process.py --file data/raw/a.pdf\n"
            "# 处理 raw 目录中的所有文件\npython scripts/process.py --dir data/raw/\n")
    answer = extractive_answer([text], "怎么把 raw 目录里的所有文件一次处理完？")
    # on lines of their own, as they run: a trial's "# 语法没问题再 reload" and the command under it were quoted as one
    # line, which a shell reads as a comment
    assert "# 处理 raw 目录中的所有文件\npython scripts/process.py --dir data/raw/ [1]" in answer


def test_a_command_under_a_comment_is_quoted_on_its_own_line():
    """A trial's runbook: "# 语法没问题再 reload" and the kubectl command under it were quoted as one line."""
    text = ("Nginx 配置热加载\n修改 ingress 配置后先检查语法：\nkubectl -n ingress-nginx exec deploy/ingress-nginx -- nginx -t\n"
            "# 语法没问题再 reload\nkubectl -n ingress-nginx exec deploy/ingress-nginx -- nginx -s reload\n如果 reload 失败，回滚 ConfigMap。")
    answer = extractive_answer([text], "nginx reload 命令")
    assert "# 语法没问题再 reload\nkubectl -n ingress-nginx exec deploy/ingress-nginx -- nginx -s reload" in answer


def test_a_question_asking_how_gets_the_numbered_steps_from_the_first_in_order():
    """A trial's "Redis 主从切换步骤" was answered from step 3, past the replication check that must come first."""
    steps = ("1. 确认从库复制状态正常：master_link_status 必须是 up。\n2. 在业务低峰期操作，提前在群里通知。\n"
             "3. 连接任意一个 sentinel 执行：SENTINEL failover mymaster。\n4. 确认新主库：SENTINEL get-master-addr-by-name。\n"
             "5. 观察 5 分钟，确认没有 Redis 连接报错。\n切换完成后，原主库会作为从库自动加入。")
    quote = _quote(extractive_answer([steps], "Redis 主从切换步骤"))
    assert quote.startswith("1. 确认从库复制状态正常") and quote.index("2. ") < quote.index("3. ") < quote.index("5. ")
    assert "切换完成后" not in quote
    one = _quote(extractive_answer([steps], "切换后原主库怎么办？"))  # not asked how: the sentence that answers
    assert "切换完成后，原主库会作为从库自动加入。" in one and not one.startswith("1. ")


def test_a_short_heading_is_quoted_with_the_line_under_it():
    text = "文档处理\n将原始文档分割成文本块。\n深度 RAG 编排器\n协调迭代检索过程并综合生成最终答案。\n工作流程\n"
    answer = extractive_answer([text], "深度 RAG 编排器这个组件负责干什么？")
    assert "深度 RAG 编排器 协调迭代检索过程并综合生成最终答案。 [1]" in answer


def test_the_next_step_of_a_list_of_short_lines_is_quoted_once():
    text = "工作流程\n用户查询输入\n初始检索 (混合)\n生成子查询 (LLM)\n迭代检索与扩展\n"
    quote = _quote(extractive_answer([text], "初始混合检索之后的下一步是什么？"))
    assert quote.startswith("初始检索 (混合) 生成子查询 (LLM)")  # the label that matches leads, not the line before it
    assert quote.count("初始检索") == 1  # two overlapping windows are never both quoted


def test_a_tree_line_keeps_its_branch_and_a_diagram_line_loses_its_frame():
    tree = "项目目录结构\nMetaSearch/\n├── config/           # 配置文件 (YAML)\n│   ├── retrieval/    # 检索策略与重排序\n"
    assert "│   ├── retrieval/    # 检索策略与重排序" in extractive_answer([tree], "检索策略和重排序的代码放在哪个目录？")
    box = "┌──────────┐\n│   用户 Query (HTTP) 入口    │\n└──────────┘\n"
    assert _quote(extractive_answer([box], "用户的 Query 从哪个入口进来？")) == "用户 Query (HTTP) 入口 [1]"


def test_a_piece_of_a_list_item_does_not_outrank_its_whole_line():
    text = "候选生成组合了五类信号：\n• Exact alias：洋芋 -> 马铃薯。\n• Shape confusion：马玲薯 -> 马铃薯。\n"
    answer = extractive_answer([text], "形近字写错了（比如马玲薯）是怎么纠正的？")
    assert "• Shape confusion：马玲薯 -> 马铃薯。" in answer


def test_a_code_statement_ending_in_a_colon_is_quotable_and_a_lead_in_is_not():
    assert generation.quotable('if confidence == "low" or score < 0.82:')
    assert generation.quotable("for item in fuzzy_search(G, query, top_k=30):")
    assert not generation.quotable("候选生成组合了五类信号：")
    assert not generation.quotable("Candidates come from five signals:")


def test_pieces_without_closing_punctuation_are_joined_with_a_space():
    assert generation._join(["初始检索 (混合)", "生成子查询"]) == "初始检索 (混合) 生成子查询"
    assert generation._join(["第一句。", "第二句。"]) == "第一句。第二句。"


def test_pieces_lines_apart_are_separated_by_an_ellipsis_and_adjacent_ones_are_not():
    question = "检索模块怎么查找文档，结果怎么融合排序？"
    apart = "检索模块结合多种检索方法查找相关文档。\n部署时需要先安装依赖包。\n日志写在 logs 目录下面。\n检索模块的结果再融合排序。"
    assert _quote(extractive_answer([apart], question)) == f"检索模块结合多种检索方法查找相关文档。{generation.GAP}检索模块的结果再融合排序。 [1]"
    adjacent = "检索模块结合多种检索方法查找相关文档。检索模块的结果再融合排序。\n部署时需要先安装依赖包。"
    assert _quote(extractive_answer([adjacent], question)) == "检索模块结合多种检索方法查找相关文档。检索模块的结果再融合排序。 [1]"


def test_a_row_ending_in_its_value_and_a_diagram_piece_are_not_labels():
    assert pieces.is_label("深度 RAG 编排器")
    assert pieces.is_label("# 处理 raw 目录中的所有文件")
    assert not pieces.is_label("Top-1 Accuracy 89.58%")
    assert not pieces.is_label("▼ reasonFast回退")
    assert not pieces.is_label("return original, None")


def test_a_command_is_quoted_with_the_sentence_that_says_what_it_does():
    text = ("交互模式:\npython app.py --interactive\n在您的终端中启动一个类似聊天的界面。\n"
            "单个查询:\npython app.py --query \"问题\"\n")
    answer = extractive_answer([text], "想在终端里像聊天一样使用，应该怎么启动？")
    assert "python app.py --interactive 在您的终端中启动一个类似聊天的界面。 [1]" in answer


def test_a_flow_broken_after_an_arrow_is_quoted_to_its_end():
    text = "处理顺序:\n每个来源独立 appendWithCap(header, text, quota)\n→ 超限自动截断 →\n→ 最接近换行或句号处切断\n配额名称\n"
    answer = extractive_answer([text], "某个来源超出配额被截断时，会在什么位置切？")
    assert "→ 超限自动截断 → → 最接近换行或句号处切断" in answer


def test_joining_spaces_count_in_the_budget_so_nothing_chosen_is_cut():
    text = ("The admin UI and the REST API are served by one process that listens on one port.\n"
            "Unless GRAPHMESH_PORT is set, the default port of the GraphMesh service is 8080")
    assert _quote(extractive_answer([text], "Which port does the service listen on by default?")).endswith("8080 [1]")


def test_a_heading_too_long_to_quote_with_its_line_leaves_the_line_whole():
    text = ("Default port\nUnless the GRAPHMESH_PORT environment variable is set in the deployment manifest or in the "
            "local dotenv file, the service listens on the default port 8080.")
    assert _quote(extractive_answer([text], "What is the default port?")).endswith("the default port 8080. [1]")


def test_a_key_value_row_is_quoted_alone_not_glued_to_the_next_row():
    assert _quote(extractive_answer(["管理员账号 admin\n服务端口 8080\n"], "管理员账号是什么？")) == "管理员账号 admin [1]"
    assert _quote(extractive_answer(["Bob,29,Paris\nCarol,41,Tokyo\n"], "Where does Bob live?")).startswith("Bob,29,Paris [1]")


def test_a_lead_in_reaches_its_command_past_a_code_fence():
    readme = ("## 安装\n\n```bash\npip install graphmesh\n```\n\n安装完成后，运行下面的命令初始化数据库：\n\n"
              "```bash\ngraphmesh init-db --url postgres://localhost/gm\n```\n")
    assert "graphmesh init-db --url postgres://localhost/gm" in extractive_answer([readme], "怎么初始化数据库？")


def test_a_markdown_bullet_lead_in_is_not_code():
    assert not generation.quotable("- Configure the service:")
    assert pieces.is_label("- Configure the service:")


def test_a_word_wrapped_across_two_lines_is_joined_without_a_space():
    assert generation._join(["未与劳动者订", "立书面劳动合同的，"]) == "未与劳动者订立书面劳动合同的，"
    assert generation._join(["深度 RAG", "编排器"]) == "深度 RAG 编排器"


def test_of_an_arrow_flow_the_step_that_answers_is_quoted_not_the_whole_flow():
    flow = ("请求进入网关并完成身份鉴权与限流检查 →\n→ 检索服务并行执行关键词与向量召回 →\n→ 重排序模型对候选片段重新打分排序 →\n"
            "→ 打包上下文并按配额截断每个来源 →\n→ 生成答案并附引用编号返回客户端")
    assert _quote(extractive_answer([flow], "答案最后返回给谁？")).startswith("→ 生成答案并附引用编号返回客户端")


STEPS = ("1. 安装\n星图同步工具的安装步骤如下：\n1. 下载安装包 xingtu-sync-2.3.tar.gz。\n"
         "2. 执行 pip install xingtu-sync-2.3.tar.gz 完成安装。\n3. 运行 xingtu --version 检查版本。")
APPROVALS = "2. 访问控制\n访问重要数据须依次完成：\n（1）申请人填写数据访问申请表；\n（2）部门负责人审批；\n（3）信息中心开通权限。"


@pytest.mark.parametrize("text, question, items", [
    (STEPS, "星图同步工具的安装步骤有哪些？", ["1. 下载安装包", "2. 执行 pip install", "3. 运行 xingtu --version"]),
    (APPROVALS, "访问重要数据需要经过哪几个步骤？", ["（1）申请人", "（2）部门负责人审批", "（3）信息中心开通权限"]),
])
def test_a_question_asking_for_steps_gets_the_whole_list_after_its_lead_in(text, question, items):
    answer = extractive_answer([text], question)
    assert all(item in answer for item in items), answer
    assert answer.rstrip().endswith("[1]")


def test_a_list_is_quoted_whole_only_when_the_question_asks_for_one():
    answer = extractive_answer([APPROVALS], "访问重要数据要谁审批？")
    assert "（3）信息中心开通权限" not in answer


def test_a_long_list_is_cut_after_the_last_item_that_fits():
    items = "\n".join(f"{i}. 第{i}步：检查配置文件中的第{i}组参数是否与部署环境一致并记录结果。" for i in range(1, 10))
    answer = extractive_answer([f"部署前的检查步骤如下：\n{items}"], "部署前要做哪些检查步骤？")
    quote = answer.split("\n")[1]
    assert len(quote) <= LIST_MAX_CHARS + len(" [1]")
    assert quote.removesuffix(" [1]").endswith("一致并记录结果。")  # whole items only


ACTION_ITEMS = ("行动项\n事项 | 负责人 | 截止日期\n修复两个严重缺陷 | 王强 | 3月19日\n"
                "分析同步速度慢的根本原因并输出报告 | 赵敏 | 3月21日\n提交华东机房扩容采购申请 | 李娜 | 3月18日")


def test_a_table_row_is_quoted_with_its_header_row_so_its_values_keep_their_column_names():
    assert _quote(extractive_answer([ACTION_ITEMS], "王强负责什么，什么时候完成")) == \
        f"事项 | 负责人 | 截止日期{generation.ROW_SEPARATOR}修复两个严重缺陷 | 王强 | 3月19日 [1]"
    assert _quote(extractive_answer([ACTION_ITEMS], "李娜要提交什么申请？")) == \
        f"事项 | 负责人 | 截止日期{generation.GAP}提交华东机房扩容采购申请 | 李娜 | 3月18日 [1]"


def test_a_short_table_row_that_answers_is_quoted_with_its_header_not_an_unrelated_sentence():
    # a trial's .docx: the leave table ranked first, and its English sentence (no word of the question) was quoted
    text = ("Fathers are entitled to 15 days of paid paternity leave, which must be taken within six months of the birth.\n"
            "假期类型 | 天数\n婚假 | 13天\n丧假 | 3天")
    answer = extractive_answer([text], "丧假有几天？")
    assert answer.splitlines()[1] == "假期类型 | 天数 … 丧假 | 3天 [1]"
    assert pieces.quotable("丧假 | 3天") and not pieces.quotable("丧假 |") and not pieces.quotable("3天")


def test_a_list_question_about_a_table_quotes_its_label_header_and_rows():
    quote = _quote(extractive_answer([ACTION_ITEMS], "行动项有哪些"))
    assert quote.startswith("行动项 事项 | 负责人 | 截止日期；修复两个严重缺陷 | 王强 | 3月19日；")
    assert quote.endswith("提交华东机房扩容采购申请 | 李娜 | 3月18日 [1]")


def test_a_later_source_that_covers_the_question_far_less_than_the_first_does_not_pad_the_answer():
    sources = ["出差期间的伙食补助按每人每天120元标准发放。", "住宿费按实际发生金额报销，需提供发票。", "员工出差应乘坐经济舱。"]
    assert _quote(extractive_answer(sources, "出差一天的餐补是多少钱")) == "出差期间的伙食补助按每人每天120元标准发放。 [1]"
    # a later source that answers another part of the question as well is kept
    both = extractive_answer(["年休假5天。", "婚假3天，另加奖励婚假7天。"], "年假和婚假各几天")
    assert both.splitlines()[1:] == ["年休假5天。 [1]", "婚假3天，另加奖励婚假7天。 [2]"]


def test_an_english_question_gets_the_sentence_that_answers_whole_not_the_paragraph_cut_at_the_budget():
    text = ("Annual leave. Full-time employees receive 15 days of paid annual leave per calendar year. Unused days may "
            "be carried over up to a maximum of 5 days. Requests go through the HR portal.")
    answer = extractive_answer([text], "How many unused leave days can be carried over?")
    assert "Unused days may be carried over up to a maximum of 5 days. [1]" in answer
    assert "HR portal" not in answer and not answer.splitlines()[1].startswith("Annual leave.")
    assert answer.splitlines()[0] == generation.EXTRACTIVE_LABEL_EN  # an English question gets an English label
    assert generation.asks_amount("How many days?") and generation.asks_amount("What is the upload limit?")
    assert generation.asks_list("What are the steps to reset a password?") and not generation.asks_list("Who approves leave?")


def test_a_sentence_and_the_table_row_after_it_are_not_joined_by_the_row_separator_and_a_url_or_time_is_not_cut():
    assert generation._join(["The agent reloads on SIGHUP.", "Option | Default"]) == "The agent reloads on SIGHUP. Option | Default"  # noqa: SLF001
    assert generation._join(["事项 | 负责人", "修复缺陷 | 王强"]) == "事项 | 负责人；修复缺陷 | 王强"  # noqa: SLF001
    texts = {p.text for p in pieces.quotable_pieces("Batches go to https://ingest.lumen.example every 10:00 to 16:00.")}
    assert not any(t.startswith("//") or t.startswith("00") for t in texts)
    assert {"入口: POST /api/reason/query", "POST /api/reason/query"} <= {p.text for p in pieces.quotable_pieces("入口: POST /api/reason/query")}


def test_the_head_of_a_line_cut_at_its_colon_is_never_quoted_alone():
    # "w=0.25" reads as code, so the head "C维度 (3, w=0.25):" once passed as quotable; it introduces its own line
    texts = {p.text for p in pieces.quotable_pieces("C维度 (3, w=0.25): cot_quality/reasoning_depth/multi_hop_accuracy")}
    assert texts == {"C维度 (3, w=0.25): cot_quality/reasoning_depth/multi_hop_accuracy", "cot_quality/reasoning_depth/multi_hop_accuracy"}
    assert {p.text for p in pieces.quotable_pieces("if score < 0.82:")} == {"if score < 0.82:"}  # a whole line ending in one stays


def test_an_english_semicolon_joins_clauses_of_one_sentence_but_a_chinese_one_still_ends_a_piece():
    texts = {p.text for p in pieces.quotable_pieces("Secret keys can be rotated from the dashboard; the old key keeps "
                                                    "working for 24 hours after rotation.")}
    assert "Secret keys can be rotated from the dashboard; the old key keeps working for 24 hours after rotation." in texts
    assert {"第一款规定；", "第二款规定。"} <= {p.text for p in pieces.quotable_pieces("第一款规定；第二款规定。")}


def test_a_question_asking_how_long_prefers_a_number_with_a_unit_of_time_to_a_version_number():
    question = "升级到3.2.0大概要停机多长时间？"
    wanted = generation.asked_number(question)
    assert wanted.search("预计需要20到40分钟") and not wanted.search("升级到 3.2.0 版本")
    source = "升级到 3.2.0 后，仪表盘上限提高到60个。升级过程需要停机20到40分钟。"
    answer = generation.extractive_answer([source], question, max_sentences_per_source=1)
    assert answer.splitlines()[1] == "升级过程需要停机20到40分钟。 [1]"  # any number counted alike: the first
    money = generation.asked_number("出差一晚住宿能报多少钱？")
    assert money.search("每晚550元") and money.search("¥ 300") and not money.search("第26条")
    assert generation.asked_number("有几个步骤？") is True  # a count of no unit kind: any number
    assert generation.asked_number("谁负责审批？") is False
    assert generation.asked_number("How long are backups kept?").search("kept for 35 days")


def test_a_count_of_working_days_answers_how_long():
    # a fresh user's trial: "办理周期约为 15 个工作日" was left out of the answer to 签证办下来要多久？
    wanted = generation.asked_number("签证办下来要多久？")
    assert wanted.search("约为 15 个工作日") and wanted.search("3个自然日") and wanted.search("5 工作日")
    assert generation.asked_number("How long does a refund take?").search("within 10 business days")
    source = "报名强化班的学员可以申请 X2 学习签证。学校提供录取通知书和 JW202 表，办理周期约为 15 个工作日。签证材料请通过邮件发送给国际部。"
    assert "办理周期约为 15 个工作日" in generation.extractive_answer([source], "签证办下来要多久？")


def test_a_comment_over_several_commands_is_quoted_with_all_of_them():
    source = ("升级前请先备份元数据库。私有化部署的客户需要执行以下升级命令：\n# 停止旧版本服务并备份元数据\nqlbi-ctl stop\n"
              "qlbi-ctl backup --target /data/backup/qlbi.tar.gz\n# 执行升级\nqlbi-ctl upgrade --version 3.2.0\n")
    texts = [p.text for p in pieces.quotable_pieces(source)]
    assert "# 停止旧版本服务并备份元数据\nqlbi-ctl stop\nqlbi-ctl backup --target /data/backup/qlbi.tar.gz" in texts
    # the lead-in introduces the comment and its commands, not the comment alone
    assert "私有化部署的客户需要执行以下升级命令：\n# 停止旧版本服务并备份元数据\nqlbi-ctl stop\nqlbi-ctl backup --target " \
           "/data/backup/qlbi.tar.gz" in texts
    assert not any(t.startswith("私有化部署的客户需要执行以下升级命令：") and t.endswith("备份元数据") for t in texts)
    answer = generation.extractive_answer([source], "升级前备份元数据的命令怎么写？")
    assert "qlbi-ctl backup --target /data/backup/qlbi.tar.gz" in answer and "upgrade" not in answer


def test_a_numbered_name_in_the_question_quotes_its_own_line_not_the_line_of_another_number():
    rows = lambda n: "\n".join(f"{n}号仓库第{r}排货架的最大承重为 {100 * n + r} 千克。" for r in range(1, 8))
    answer = extractive_answer([rows(3), rows(5)], "3号仓库第5排货架最大承重是多少？")
    assert answer.splitlines()[1] == "3号仓库第5排货架的最大承重为 305 千克。 [1]"
    assert "505" not in answer  # 5号仓库's line answers nothing asked
    # quantities are not names: a threshold of other days still answers "请假5天"
    leave = extractive_answer(["请假3天以内由部门经理审批；3天以上由分管副总审批。"], "请假5天谁来批")
    assert "3天以上由分管副总审批" in leave


def test_a_sentence_past_the_budget_is_quoted_whole_not_cut_mid_word():
    # a fresh user's rate line of 166 characters read "..., fuel inc [1]" when cut at the 160-character budget
    rates = ("Boats are booked in the FleetDesk system at least 48 hours before departure.\n"
             "Boat time is charged to the project grant at 85 dollars per hour for RV Tern, 55 dollars per hour "
             "for RV Petrel and 240 dollars per hour for RV Osprey, fuel included.")
    answer = extractive_answer([rates], "How much does an hour on RV Tern cost my grant?")
    assert answer.splitlines()[1].endswith("RV Osprey, fuel included. [1]")


def test_a_quote_past_the_whole_piece_cap_is_cut_at_a_word_boundary_with_an_ellipsis():
    words = " ".join(f"word{i}" for i in range(120))  # one unpunctuated sentence of about 800 characters
    quote = extractive_answer([words], "word7")[len(generation.EXTRACTIVE_LABEL_EN) + 1:].removesuffix(" [1]")
    assert quote.endswith("…") and len(quote) <= generation.WHOLE_PIECE_MAX_CHARS
    assert quote[:-1].split(" ")[-1] in words.split(" ")  # the last word whole


@pytest.mark.parametrize(("quote", "budget", "expected"), [
    ("短句。", 10, "短句。"),
    ("甲乙丙丁戊己，庚辛壬癸子丑寅卯辰巳午未", 16, "甲乙丙丁戊己…"),
    ("alpha beta gamma delta", 14, "alpha beta…"),
    ("abcdefghij", 6, "abcde…"),  # no boundary at all: cut mid-word
])
def test_cut_quote_falls_after_a_clause_mark_or_space(quote, budget, expected):
    assert generation.cut_quote(quote, budget) == expected


def test_a_question_about_one_grade_quotes_that_grade_s_row_not_another_s():
    # a fresh user's incident table: "P1 ...?" was answered with the P3 row, which shares 故障 and 通报 with it
    table = ("等级 | 定义 | 确认时限 | 首次通报时限 | 通报对象\n"
             "P0 | 核心支付或登录全面不可用 | 5 分钟 | 15 分钟 | CTO、客服负责人\n"
             "P1 | 单一核心功能不可用或错误率超过 5% | 15 分钟 | 30 分钟 | 研发总监\n"
             "P3 | 轻微问题或内部工具故障 | 下一个工作日 | 无需通报 | 无")
    quote = extractive_answer([table], "P1 故障的首次通报时限是多少？").splitlines()[1]
    assert "P1 | 单一核心功能不可用或错误率超过 5% | 15 分钟 | 30 分钟 | 研发总监" in quote and "P3" not in quote
    assert quote.startswith("等级 | 定义")  # with its column names


def test_grades_named_by_a_letter_and_a_number_are_numbered_names():
    from services.common.text import numbered_classifier, numbered_names

    assert numbered_names("P1 故障升级到 L3 值班；MP3、v1.2 和 A4纸 不是") == ["P1", "L3"]
    assert numbered_classifier("P1") == "P" and numbered_classifier("5排") == "排"


def test_a_question_giving_a_quantity_quotes_the_row_whose_range_holds_it():
    # a fresh user's leave table: "工作满三年" was answered with the table's header and the sick-leave rule
    text = ("第十二条 员工享受带薪年休假，年假天数按在本公司连续工作的年限确定，具体如下表：\n"
            "在本公司工作年限 | 带薪年假天数 | 说明\n"
            "满1年不满3年 | 5天 | 入职满12个月后开始享受\n"
            "满3年不满5年 | 8天 | 含法定年假5天\n"
            "满5年不满10年 | 12天 | 可跨年度顺延一次\n"
            "满10年及以上 | 15天 | 另加2天“长期服务假”\n"
            "第十三条 当年未休完的年假可以顺延至次年3月31日前使用。\n"
            "第十五条 婚假为13天（含法定婚假3天及公司额外给予的10天），须在领取结婚证后一年内一次性休完。")
    quote = extractive_answer([text], "我在公司干了6年了，一年能休几天年假？").splitlines()[1]
    assert "满5年不满10年 | 12天" in quote and "满3年不满5年" not in quote and "满10年及以上" not in quote
    assert "满10年及以上 | 15天" in extractive_answer([text], "工龄12年的员工年假几天？")


def test_a_traditional_seniority_table_gives_the_row_whose_range_holds_the_question():
    """A trial's Taiwan leave table (滿/未滿): 做了6年 got no row, 滿1年 the 滿6個月未滿1年 row, 3年半 the 滿2年未滿3年 row."""
    table = ("年資 | 特休天數\n滿6個月未滿1年 | 3日\n滿1年未滿2年 | 7日\n滿2年未滿3年 | 10日\n"
             "滿3年未滿5年 | 14日\n滿5年未滿10年 | 15日")
    for question, row in (("我在公司做了6年，特休有幾天？", "滿5年未滿10年 | 15日"), ("工作滿1年有幾天特休？", "滿1年未滿2年 | 7日"),
                          ("年資3年半，特休有幾天？", "滿3年未滿5年 | 14日"), ("入职8个月有几天特休？", "滿6個月未滿1年 | 3日")):
        quote = extractive_answer([table], question).splitlines()[1]
        assert row in quote and quote.count(" | ") <= 2, (question, quote)  # the header and that row


def test_a_row_keyed_by_one_quantity_answers_a_question_giving_that_quantity():
    """A trial's 宝宝8个月打什么疫苗 quoted the 1月龄 and 2月龄 rows of a vaccination table."""
    table = ("接种月龄 | 疫苗 | 剂次\n出生时 | 乙肝疫苗、卡介苗 | 第1剂\n1月龄 | 乙肝疫苗 | 第2剂\n2月龄 | 脊灰灭活疫苗 | 第1剂\n"
             "8月龄 | 麻腮风疫苗、乙脑减毒活疫苗 | 各第1剂\n18月龄 | 百白破疫苗、麻腮风疫苗 | 第4剂")
    quote = extractive_answer([table], "宝宝8个月要打什么针").splitlines()[1]
    assert "8月龄 | 麻腮风疫苗、乙脑减毒活疫苗 | 各第1剂" in quote and "1月龄" not in quote and "18月龄" not in quote


def test_a_row_keyed_by_a_bare_range_reads_its_unit_from_the_columns_header():
    """A Hong Kong trial's premium table keyed its rows "51-60" under "Age Band": 58歲 was answered with another table."""
    table = ("Age Band | Plan A | Plan B\n18-30 | HK$1,260 | HK$2,380\n31-40 | HK$1,580 | HK$2,980\n"
             "51-60 | HK$3,320 | HK$6,280\n61-64 | HK$4,460 | HK$8,450")
    quote = _quote(extractive_answer([table], "我58歲，計劃B年費幾錢"))
    assert "51-60 | HK$3,320 | HK$6,280" in quote and "31-40" not in quote and "61-64" not in quote
    days = "旅程日數 | 標準計劃 | 優越計劃\n1-5 | HK$145 | HK$235\n6-10 | HK$220 | HK$360\n11-18 | HK$310 | HK$495"
    assert "6-10 | HK$220 | HK$360" in _quote(extractive_answer([days], "去日本玩8日，標準計劃幾錢"))


def test_a_sentence_cut_at_a_semicolon_is_quoted_whole_a_rule_with_its_exception():
    # "爽约两次" was answered with "…暂停预约权限7天；" alone, the rest of its sentence left out
    text = ("四、取消与改约\n13. 开始前2小时内取消或无故不到的，记爽约一次，并扣除所预约的学时。\n"
            "14. 一个自然月内爽约累计2次的，暂停预约权限7天；累计3次的，暂停预约权限14天。\n"
            "15. 因病无法练车的，可在3天内凭医院证明申请撤销爽约记录。")
    answer = extractive_answer([text], "这个月已经爽约两次了，会不会被限制预约？")
    assert "14. 一个自然月内爽约累计2次的，暂停预约权限7天；累计3次的，暂停预约权限14天。" in answer


def test_a_clause_is_never_quoted_without_the_rest_of_its_sentence():
    # across scripts a clause's cosine can beat its sentence's: "2. 迟到…每次扣款20元；" was quoted without "超过15分钟…"
    text = "考勤规定\n2. 迟到或早退在15分钟以内的，每次扣款20元；超过15分钟但不足1小时的，按半天事假处理。\n3. 旷工一天扣三天工资。"
    clause, rest = "2. 迟到或早退在15分钟以内的，每次扣款20元；", "超过15分钟但不足1小时的，按半天事假处理。"
    similarity = {clause: 0.9, clause + rest: 0.85, rest: 0.1, "3. 旷工一天扣三天工资。": 0.7, "考勤规定": 0.1}
    answer = extractive_answer([text], "How much is deducted for being ten minutes late?", similarity=similarity)
    assert clause + rest in answer


def test_a_semicolon_before_a_list_item_or_a_line_break_does_not_join_pieces():
    from services.gateway.answer.quotable import quotable_pieces

    items = "有下列情形之一的，处拘役：（一）追逐竞驶，情节恶劣的；（二）醉酒驾驶机动车的；"
    assert not any(c.whole_sentence for c in quotable_pieces(items))
    lines = "报名截止日为3月1日；\n考试安排另行通知。"
    assert not any(c.whole_sentence for c in quotable_pieces(lines))
    long_rule = "甲" * 100 + "；" + "乙" * 100 + "。"  # over CONTINUATION_MAX_CHARS: its pieces only
    assert not any(c.whole_sentence for c in quotable_pieces(long_rule))
    rule = quotable_pieces("收购时间：每天13:00至19:00；清明节前延长至21:00。")
    assert [c.text for c in rule if c.whole_sentence] == ["收购时间：每天13:00至19:00；清明节前延长至21:00。"]
    line = next(c for c in rule if c.labelled_line)
    assert line.text == "收购时间：每天13:00至19:00；"
    assert next(c for c in rule if c.whole_sentence).holds(line)  # inside the sentence: never without its exception


def test_an_english_question_giving_a_weight_quotes_the_row_whose_range_holds_it():
    # English conditions were never read: "a 20kg dog" got the first rows of a price table
    table = ("Boarding prices\nAccommodation | Run size | Price per night\n"
             "Two dogs sharing one run | 2.0 m x 3.0 m | £45.00\n"
             "Small dog (up to 10 kg) | 1.5 m x 2.0 m | £22.00\n"
             "Medium dog (10 to 25 kg) | 2.0 m x 3.0 m | £28.00\n"
             "Large dog (over 25 kg) | 2.5 m x 3.5 m | £34.00")
    quote = extractive_answer([table], "nightly price for a 20kg spaniel?").splitlines()[1]
    assert "Medium dog (10 to 25 kg) | 2.0 m x 3.0 m | £28.00" in quote and "£45.00" not in quote
    assert "Large dog (over 25 kg) | 2.5 m x 3.5 m | £34.00" in extractive_answer([table], "price per night for my 40 kg mastiff")


def test_conditions_are_quantities_with_a_unit_and_a_rate_of_one_unit_is_not_one():
    from services.gateway.answer.question_cues import condition_quantities, holds_condition

    assert condition_quantities("我在公司干了6年了，一年能休几天年假？") == [(6.0, "年")]
    assert condition_quantities("员工一天的饭补有多少？") == []  # 一天: a rate
    assert condition_quantities("工作满一年有几天年假？") == [(1.0, "年")]
    assert condition_quantities("I've worked here 6 years, how much leave do I get?") == [(6.0, "年")]
    assert holds_condition("满5年不满10年 | 12天", [(6.0, "年")]) and not holds_condition("满5年不满10年", [(6.0, "天")])
    assert not holds_condition("满1年不满3年 | 5天", [(6.0, "年")])


def test_a_chinese_question_giving_a_quantity_picks_the_row_of_an_english_table_that_holds_it():
    # across scripts no word is shared, so the range's bonus had been withheld: "72 hours or more | No fee" was quoted
    table = ("Cancellation fees\nNotice before arrival | Fee\n72 hours or more | No fee\n"
             "24 to 72 hours | 50% of the first night\nLess than 24 hours or no-show | 100% of the first night")
    similarity = {"Cancellation fees": 0.5, "Notice before arrival | Fee": 0.6, "72 hours or more | No fee": 0.8,
                  "24 to 72 hours | 50% of the first night": 0.79, "Less than 24 hours or no-show | 100% of the first night": 0.7}
    best = extractive_answer([table], "取消预订提前两天要付多少违约金？", similarity=similarity,
                             max_sentences_per_source=1).splitlines()[1]
    assert best == "Notice before arrival | Fee … 24 to 72 hours | 50% of the first night [1]"  # the row under its header


def test_nights_are_a_unit_and_a_stay_is_looked_up_by_them():
    from services.gateway.answer.question_cues import condition_quantities, holds_condition

    assert condition_quantities("一年住了25晚是什么会员等级？") == [(25.0, "晚")]
    assert condition_quantities("连住三晚有优惠吗") == [(3.0, "晚")] and condition_quantities("一晚多少钱？") == []  # a rate
    assert holds_condition("累计入住10晚或以上升级为金卡", [(25.0, "晚")]) and holds_condition("7-13晚 | 85折", [(10.0, "晚")])
    assert holds_condition("Stays of 5 nights or more get 10% off", condition_quantities("We stay 6 nights, any discount?"))


def test_a_condition_in_one_unit_of_time_is_held_by_a_range_in_another_it_converts_to():
    # a fresh user's "取消预订提前两天" against an hourly cancellation table: 2 days are 48 hours
    from services.gateway.answer.question_cues import condition_quantities, holds_condition, in_unit

    two_days = condition_quantities("取消预订提前两天要付多少违约金？")
    assert holds_condition("24 to 72 hours | 50% of the first night", two_days)
    assert not holds_condition("72 hours or more | No fee", two_days)
    assert holds_condition("6个月以内", [(0.5, "年")]) and in_unit(90, "分钟", "小时") == 1.5
    assert in_unit(2, "月", "天") is None  # a month is not a whole number of days


def test_a_question_naming_a_weekday_one_way_quotes_the_rule_that_names_it_another():
    # 星期一 asked, 周一 written (a tea garden's opening rules, a blind set): the Tuesday-to-Sunday line alone was quoted
    source = "茶园每年3月15日至11月15日对外开放，开放时间为周二至周日8:30至17:00。\n每周一闭园维护，遇法定节假日照常开放。\n入园须购票。"
    answer = extractive_answer([source], "星期一茶园开门吗？")
    assert "每周一闭园维护" in answer
    assert "每周一闭园维护" in extractive_answer([source], "礼拜一茶园开门吗？")


def test_a_table_header_row_is_never_quoted_alone():
    # a fresh user's canteen question was answered with the column names "餐次 | 供应时间 | 价格（元）"
    source = ("员工餐厅位于星河大厦2楼，工作日供应三餐。\n餐次 | 供应时间 | 价格（元）\n早餐 | 7:30-9:30 | 8\n"
              "午餐 | 11:30-13:30 | 22\n晚餐 | 17:30-19:30 | 18")
    whole = extractive_answer([source], "食堂几点供应，价格多少？")  # the sentence introducing the table brings its rows
    assert "餐次 | 供应时间" not in whole or all(row in whole for row in ("早餐 | 7:30-9:30 | 8", "晚餐 | 17:30-19:30 | 18"))
    assert "午餐 | 11:30-13:30 | 22" in extractive_answer([source], "午餐几点供应？")  # a row keeps its header
    # a first row with a number may be data (a table without a header row): it stays quotable
    assert "婚假 | 十三天" in extractive_answer(["婚假 | 十三天\n丧假 | 三天"], "婚假几天？")


def test_a_source_that_copies_a_quoted_one_is_not_quoted_again():
    # a fresh user stored the meeting minutes twice (a copy under another name): the answer said the same line as [1] and [2]
    minutes = "第三季度公司营业收入为1.28亿元，同比增长17%。\n第四季度计划招聘40人。"
    answer = extractive_answer([minutes, minutes, "第三季度新签客户63家。"], "第三季度营收是多少？")
    assert answer.count("1.28亿元") == 1 and "[2]" not in answer


FAQ = """Lumora Expense FAQ

Q: How do I pay for a client dinner?
A: Use the corporate card. Client dinners are capped at 80 USD per person including tip.

Q: Can I expense a home office chair?
A: Yes, once per three years, up to 300 USD, with manager approval.
"""


@pytest.mark.parametrize("question,answer", [
    ("Can I expense a home office chair?", "A: Yes, once per three years, up to 300 USD"),
    ("How do I pay for a client dinner?", "A: Use the corporate card."),
    ("常见问题里：问：忘记密码怎么办？", "答：在登录页点击“忘记密码”"),
])
def test_an_faq_question_is_quoted_with_its_answer_never_alone(question, answer):
    text = FAQ + "\n问：忘记密码怎么办？\n答：在登录页点击“忘记密码”，用注册手机号接收验证码后重置。\n"
    quoted = extractive_answer([text], question)
    first = quoted.split("\n")[1]
    assert answer in first, quoted  # the question's own line comes with the line that answers it
    assert not any(line.rstrip(" [1]").rstrip().endswith(("?", "？")) for line in quoted.split("\n")[1:])
    assert not pieces.quotable("Q: Can I expense a home office chair?") and pieces.is_label("问：忘记密码怎么办？")


def test_english_table_rows_are_joined_with_an_ascii_semicolon_and_chinese_ones_with_a_full_width_one():
    assert generation._join(["Model | Price (USD)", "Harbor Ridge X | 1,299"]) == "Model | Price (USD); Harbor Ridge X | 1,299"  # noqa: SLF001
    assert generation._join(["车型 | 价格", "山地车 | 1,299"]) == "车型 | 价格；山地车 | 1,299"  # noqa: SLF001


def test_a_value_is_quoted_with_the_label_that_says_whose_it_is():
    # a fresh user's architecture notes: one line per service; the value alone ("同步调用，…超时后默认放行") named no service
    text = ("清结算服务 settlement：每天凌晨 02:00 生成前一日的结算文件，T+1 结算给商户，节假日顺延。\n"
            "风控服务 risk-engine：同步调用，单笔风控决策的超时时间为 150 毫秒，超时后默认放行并记录审计日志。")
    pieces_ = pieces.quotable_pieces(text)
    line = next(c for c in pieces_ if c.labelled_line and c.text.startswith("风控服务"))
    value = next(c for c in pieces_ if c.text.startswith("同步调用"))
    assert line.holds(value) and not value.holds(line)
    # the values outscore their lines on similarity (as across scripts); the lines are quoted, labels and all
    similarity = {c.text: (1.0 if c.text.startswith(("同步调用", "每天凌晨")) else 0.0) for c in pieces_}
    answer = extractive_answer([text], "风控超时了会怎样", similarity=similarity)
    assert "风控服务 risk-engine：同步调用" in answer and not any(l.startswith("同步调用") for l in answer.splitlines())


def test_a_labelled_line_answers_as_well_as_its_best_part_and_is_quoted_whole():
    # "Restart the ledger with the command: kubectl ..." : the command scores best, and is quoted with its lead-in
    text = ("Restart the ledger with the command: kubectl rollout restart deployment/ledger -n payments\n"
            "After a restart, check that the ledger lag metric ledger_replication_lag_seconds is below 30.")
    # the whole line reads less like the question than the next line does; its command reads most like it
    similarity = {c.text: 1.0 if c.text.startswith("kubectl") else 0.6 if c.text.startswith("After") else 0.0
                  for c in pieces.quotable_pieces(text)}
    answer = extractive_answer([text], "重启 ledger 服务的命令是什么？", similarity=similarity)
    assert answer.splitlines()[1].startswith("Restart the ledger with the command: kubectl rollout restart")


def test_two_adjacent_labelled_lines_are_not_glued_into_one():
    assert generation._join(["DBA 值班：通过 PagerDuty 服务 qinglan-dba 呼叫", "支付渠道对接：林晓雯，负责银联和网联渠道"]) == \
        "DBA 值班：通过 PagerDuty 服务 qinglan-dba 呼叫；支付渠道对接：林晓雯，负责银联和网联渠道"  # noqa: SLF001
    assert generation._join(["未与劳动者订", "立书面劳动合同的，"]) == "未与劳动者订立书面劳动合同的，"  # a wrapped word still joins  # noqa: SLF001


LODGING = ("二、住宿标准\n员工出差住宿费按城市等级实行限额报销，超出部分由个人承担。\n"
           "城市等级 | 包含城市 | 普通员工（元/晚） | 经理及以上（元/晚）\n一线城市 | 北京、上海、广州、深圳 | 500 | 700\n"
           "新一线城市 | 杭州、成都、南京、武汉、西安 | 400 | 550\n其他城市 | 上述以外的地级市及县城 | 300 | 400\n"
           "两人同行且同性别的，原则上合住一间标准间，按单人标准的1.5倍报销。")


def test_the_sentence_introducing_a_small_table_is_quoted_with_its_rows_when_no_row_is_asked():
    # a fresh user's 出差住宿标准？ got "住宿费按城市等级实行限额报销" and not the city-tier table under it
    quote = extractive_answer([LODGING], "出差住宿标准？").splitlines()[1]
    assert all(row in quote for row in ("一线城市 | 北京、上海、广州、深圳 | 500 | 700", "其他城市 | 上述以外的地级市及县城 | 300 | 400"))
    # a question that names its row keeps that row alone
    named = extractive_answer([LODGING], "去杭州出差普通员工住酒店一晚能报多少钱").splitlines()[1]
    assert "新一线城市 | 杭州、成都、南京、武汉、西安 | 400 | 550" in named and "其他城市" not in named
    # a later source's table is not added: it pads
    later = extractive_answer(["出差伙食补助为每人每天100元。", LODGING], "出差补助和住宿怎么报销？")
    assert "其他城市" not in later


def test_a_row_naming_another_code_of_the_same_shape_is_not_quoted_beside_the_asked_one():
    """A trial's on-call rotation (.csv): "week of 2026-10-20" quoted the rows of two other weeks."""
    table = ("week_starting | primary | secondary\n2026-10-13 | Tom Lindqvist | Ravi Menon\n"
             "2026-10-20 | Ravi Menon | Sofia Alvarez\n2026-10-27 | Sofia Alvarez | Aisha Bello")
    answer = extractive_answer([table], "who is primary oncall the week of 2026-10-20")
    assert "2026-10-20 | Ravi Menon | Sofia Alvarez" in answer
    assert "2026-10-13" not in answer and "2026-10-27" not in answer
    parts = "主机轴承套件备件号为 2906-0980-00。空气滤芯备件号为 1622-0655-00，每 2000 h 更换。"
    assert "2906-0980-00" not in extractive_answer([parts], "1622-0655-00 是什么配件？")


def test_a_traditional_question_asking_a_count_prefers_the_sentence_with_the_number():
    """幾天 asks a count as 几天 does: the number bonus and the unit asked for apply."""
    text = "補休最多須提前申請，並經主管核准。補休期限為6個月。"
    assert extractive_answer([text], "補休最多能留幾個月？", max_sentences_per_source=1).splitlines()[1] == "補休期限為6個月。 [1]"


FEE_TABLE = ("人员类别 | 门诊报销比例 | 年度最高支付限额\n在职职工 | 70% | 2万元\n退休人员 | 85% | 3万元\n"
             "中小学生和婴幼儿 | 60% | 4000元\n18至59岁居民 | 50% | 4000元")


def test_a_follow_up_naming_a_new_subject_quotes_its_row_not_the_earlier_subjects():
    # a trial's "那孩子呢" after 退休 quoted the retirees' row again; "企业版呢" after 免费版 the free plan's
    answer = extractive_answer([FEE_TABLE], "（上文：退休人员门诊报销比例多少）那小学生呢？")
    assert "中小学生和婴幼儿 | 60%" in answer and "退休人员" not in answer
    plans = "套餐 | QPS 上限 | 每日配额\n免费版 Free | 5 | 1000\n专业版 Pro | 50 | 10万\n企业版 Enterprise | 200 | 不限"
    answer = extractive_answer([plans], "（上文：免费版 QPS 多少）企业版呢")
    assert "企业版 Enterprise | 200" in answer and "免费版" not in answer


def test_a_follow_up_whose_new_subject_names_no_row_quotes_the_other_rows_to_read():
    answer = extractive_answer([FEE_TABLE], "（上文：退休人员门诊报销比例多少）那孩子呢？")
    assert "退休人员" not in answer
    assert all(row in answer for row in ("在职职工 | 70%", "中小学生和婴幼儿 | 60%", "18至59岁居民 | 50%"))


def test_a_follow_up_asking_more_of_the_same_subject_keeps_its_row():
    answer = extractive_answer([FEE_TABLE], "（上文：退休人员门诊报销比例多少）多少钱封顶？")
    assert "退休人员 | 85% | 3万元" in answer


def test_the_closest_quote_is_the_piece_the_answer_would_quote_or_nothing_when_no_word_is_shared():
    rules = ("第七条　装修施工时间为工作日上午8:00至12:00、下午14:00至18:00。周六、周日及法定节假日不得进行电钻、电锤、切割等"
             "产生噪音的施工。\n第八条　每年春节期间小区暂停一切装修施工。")
    assert generation.closest_quote(rules, "周末可以打电钻不") == "周六、周日及法定节假日不得进行电钻、电锤、切割等产生噪音的施工。"
    assert generation.closest_quote(rules, "北京明天天气怎么样") == ""
    assert generation.closest_quote(FEE_TABLE, "退休人员报销比例") == "人员类别 | 门诊报销比例 | 年度最高支付限额 … 退休人员 | 85% | 3万元"


TEACHERS = ("任课教师\n科目 | 任课教师 | 办公室\n语文 | 王丽 | 明德楼215\n数学 | 陈建国 | 明德楼217\n"
            "体育 | 周磊 | 体育馆一楼办公室\n课表如有临时调整，班主任会在班级群里提前通知。")


def test_a_word_that_names_a_column_does_not_pick_the_row():
    """A trial's "数学老师是谁 办公室在哪" quoted the 体育 row, whose value 体育馆一楼办公室 holds the column name 办公室,
    and left out 数学's."""
    answer = extractive_answer([TEACHERS], "数学老师是谁 办公室在哪")
    assert "数学 | 陈建国 | 明德楼217" in answer and "周磊" not in answer
    assert "体育 | 周磊" in extractive_answer([TEACHERS], "体育老师办公室在哪")  # its own first cell still counts


def test_what_to_do_is_answered_with_the_steps_from_the_first():
    """A trial's "listing 被下架怎么办" quoted steps 2 to 5 and left out step 1, the check that comes first."""
    steps = ("1. 先登录卖家后台，在“账户状况”页面查看具体违规原因，截图发到运营群。\n2. 如果是图片或标题违规，24小时内修改后重新提交审核。\n"
             "3. 如果是知识产权投诉，马上转给法务同事处理。\n4. 同一条 listing 一个月内被下架两次的，要开复盘会。")
    for question, text in (("listing 被下架怎么办", steps), ("listing被下架了咋整", steps),
                           ("listing 被下架怎么办", "四、Listing 被下架怎么处理\n" + steps)):  # under an outline's heading
        answer = extractive_answer([text], question)
        assert "1. 先登录卖家后台" in answer and answer.index("1. 先登录") < answer.index("4. 同一条"), question
    # with each piece's dense similarity, where the whole run's vector is diluted and step 4 alone is closest
    similarity = {p: 0.9 if p.startswith("4.") else 0.3 if "\n" in p else 0.5 for p in generation.pieces_to_embed([steps])}
    answer = extractive_answer([steps], "listing 被下架怎么办", similarity=similarity, similarity_weight=2.0,
                               similarity_ranks_only=True)
    assert all(f"{n}. " in answer for n in range(1, 5)), answer  # the steps, all of them, in order


PREPARATION = ("1. 新品上架前，产品经理要先在“新品立项表”里填好 SKU、成本价和竞品链接。\n2. 主图必须是纯白底，产品占画面85%以上。\n"
               "3. 每个 listing 至少准备7张图：1张主图、4张卖点图。\n4. 标题不超过200个字符，品牌名放在最前面。")


def test_a_list_is_quoted_whole_only_when_it_is_what_the_question_asks_about():
    """A trial's "主图有什么要求" got all the items of 上架前准备; the one on 主图 answers."""
    answer = extractive_answer([PREPARATION], "主图有什么要求")
    assert "2. 主图必须是纯白底" in answer and "4. 标题" not in answer
    assert "4. 标题不超过200个字符" in extractive_answer([PREPARATION], "上架前准备有哪些")  # the list's own subject


CARDS = ("卡种 | 价格（元） | 有效期 | 可冻结\n次卡（10次） | 580 | 开卡起6个月 | 不可冻结\n半年卡 | 1680 | 180天 | 2次，累计最长30天\n"
         "年卡 | 2680 | 365天 | 3次，累计最长60天\n两年卡 | 4580 | 730天 | 4次，累计最长90天")


def test_the_row_a_cell_of_which_the_question_names_is_quoted_alone():
    """A trial's "年卡能冻几次" got the 次卡 and 两年卡 rows, whose cells only hold 年卡, and not the 年卡 row."""
    answer = extractive_answer([CARDS], "年卡能冻几次")
    assert "年卡 | 2680" in answer and "半年卡" not in answer and "两年卡" not in answer
    assert "两年卡 | 4580" in extractive_answer([CARDS], "两年卡多少钱")
    # with each piece's dense similarity, the 次卡 row closest (次 and 冻结): the named row still comes first
    similarity = {p: 0.9 if p.startswith("次卡") else 0.5 for p in generation.pieces_to_embed([CARDS])}
    answer = extractive_answer([CARDS], "年卡能冻几次", similarity=similarity, similarity_weight=2.0, similarity_ranks_only=True)
    assert "年卡 | 2680" in answer and "次卡" not in answer


def test_a_question_of_codes_alone_gets_the_chinese_label():
    """A trial's staff pasted bare codes (SKU-A1023, UN3481) and got an English label over Chinese quotes."""
    assert generation.extractive_label("SKU-A1023") == EXTRACTIVE_LABEL
    assert generation.extractive_label("UN3481") == EXTRACTIVE_LABEL
    assert generation.extractive_label("What is SKU-A1023?") == generation.EXTRACTIVE_LABEL_EN


def test_a_refusals_closest_quote_keeps_every_line_of_the_steps_it_quotes():
    """The closest quote took the first line of a steps run only, and then showed nothing when that line held none
    of the question's words."""
    steps = "1. 先登录卖家后台查看违规原因。\n2. 如果是图片违规，24小时内修改。\n3. 同一条 listing 一个月内被下架两次的，要开复盘会。"
    quote = generation.closest_quote(steps, "listing 被下架怎么办")
    assert quote.startswith("1. 先登录") and "3. 同一条 listing" in quote
