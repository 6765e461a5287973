#!/usr/bin/env python3
"""tests/ref/paper/make_fixture.py: writes the constructed result summary of the paper-table
test (tests/lua/test_paper.lua): summaries/ablation_pruning/{values,bootstrap}.csv. The values
are chosen so that the table cells and verdicts can be checked by hand (README.md); run by
hand, never by `make test`."""
import os

ROWS = [("taylor", "Taylor"), ("circavg", "CircAvg"), ("hydra_taylor", "Hydra (Taylor)"),
        ("hydra_circ", "Hydra (Circ)"), ("deep_ensemble", "Deep Ensembles")]
KEYS = ["acc", "ece", "calibration/ece", "nll", "calibration/nll", "misclf_auroc_msp",
        "misclf_auroc_maxlogit"]
for g in ("avg", "near", "far"):
    KEYS += [f"ood_{g}_auroc_msp", f"ood_{g}_fpr95_msp", f"ood_{g}_fpr95_id_msp"]
# the values the hand-checked cells use (fractions, seeds 0, 1, 2)
SET = {
    ("taylor", "ood_avg_auroc_msp"): [0.72, 0.73, 0.74],
    ("circavg", "ood_avg_auroc_msp"): [0.73, 0.75, 0.77],
    ("hydra_taylor", "ood_avg_auroc_msp"): [0.739, 0.75, 0.761],
    ("hydra_circ", "ood_avg_auroc_msp"): [0.761, 0.78, 0.799],
    ("deep_ensemble", "ood_avg_auroc_msp"): [0.812, 0.83, 0.848],
    ("hydra_circ", "acc"): [0.86, 0.87, 0.88],
    ("deep_ensemble", "acc"): [0.88, 0.885, 0.89],
}
BOOT = [("circavg", "taylor", "ood_avg_auroc_msp", 0.02, 0.011, 0.029),
        ("hydra_taylor", "taylor", "ood_avg_auroc_msp", 0.02, 0.015, 0.025),
        ("hydra_circ", "circavg", "ood_avg_auroc_msp", 0.03, 0.02, 0.04),
        ("hydra_circ", "hydra_taylor", "ood_avg_auroc_msp", 0.03, -0.005, 0.065),
        ("hydra_circ", "deep_ensemble", "ood_avg_auroc_msp", -0.05, -0.054, -0.046),
        ("hydra_circ", "deep_ensemble", "acc", -0.015, -0.021, -0.009)]

def g(v):
    return repr(float(v)) if False else "%.17g" % v

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "summaries", "ablation_pruning")
os.makedirs(out, exist_ok=True)
head = ("# hydra-paper-summary-1 ablation_pruning: %s (hydra repro --write; results/README.md, "
        "\"Paper summaries\")\n")
with open(os.path.join(out, "values.csv"), "w") as f:
    f.write(head % "the per-seed metrics of every row")
    f.write("row,label,seed,key,value\n")
    for i, (row, label) in enumerate(ROWS):
        for seed in range(3):
            for j, key in enumerate(KEYS):
                v = SET.get((row, key))
                if v is not None:
                    v = v[seed]
                elif key.endswith("nll"):
                    v = 0.3 + 0.01 * i + 0.001 * j + 0.002 * seed
                else:
                    v = 0.5 + 0.01 * i + 0.001 * j + 0.002 * seed
                lab = '"%s"' % label if "," in label else label
                f.write("%s,%s,%d,%s,%s\n" % (row, lab, seed, key, g(v)))
with open(os.path.join(out, "bootstrap.csv"), "w") as f:
    f.write(head % "paired bootstrap over the test samples of every comparison")
    f.write("a,b,key,resamples,boot_seed,seeds,diff,lo,hi\n")
    for a, b, key, d, lo, hi in BOOT:
        f.write("%s,%s,%s,1000,0,3,%s,%s,%s\n" % (a, b, key, g(d), g(lo), g(hi)))
