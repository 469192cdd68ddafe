"""What the paper reports, in one place, so our tables can print it beside our numbers.

Source: He, Gao, Kong, Liu, Yang, "Wider and Deeper, Cheaper and Faster: Tensorized
LSTMs for Sequence Learning", NIPS 2017 (``shared/paper/tensorized-lstm-nips2017.tex``):
Table 1 (label ``tab_wiki``), Table 2 (``tab_algo``) and Table 3 (``tab_mnist``),
copied as printed (SPEC section 10 quotes the tLSTM rows). The paper's figures 3-5 have
no numbers in the source, so there is nothing to put beside our curves.
"""

from __future__ import annotations

PAPER = "He et al., NIPS 2017"

# Each row: (model, then the table's columns as printed in the paper).
PAPER_TABLES: dict[str, dict] = {
    "table1": {
        "title": "Table 1: test BPC on Wikipedia (enwik8)",
        "source": f"{PAPER}, Table 1 (tab_wiki)",
        "columns": ("BPC", "# Param."),
        "rows": [
            ("MI-LSTM (Wu et al. 2016)", "1.44", "~17M"),
            ("mLSTM (Krause et al. 2016)", "1.42", "~20M"),
            ("HyperLSTM+LN (Ha et al. 2016)", "1.34", "26.5M"),
            ("HM-LSTM+LN (Chung et al. 2016)", "1.32", "~35M"),
            ("Large RHN (Zilly et al. 2016)", "1.27", "~46M"),
            ("Large FS-LSTM-4 (Mujika et al. 2017)", "1.245", "~47M"),
            ("2 x Large FS-LSTM-4 (Mujika et al. 2017)", "1.198", "~94M"),
            ("3D tLSTM+CN (L=6, M=1200)", "1.264", "50.1M"),
        ],
    },
    "table2": {
        "title": "Table 2: test accuracy and training samples to solve, algorithmic tasks",
        "source": f"{PAPER}, Table 2 (tab_algo)",
        "columns": ("Addition acc.", "Addition # samples", "Memorization acc.", "Memorization # samples"),
        "rows": [
            ("Stacked LSTM (Graves 2013)", "51%", "5M", ">50%", "900K"),
            ("Grid LSTM (Kalchbrenner et al. 2015)", ">99%", "550K", ">99%", "150K"),
            ("3D tLSTM+CN (L=7)", ">99%", "298K", ">99%", "115K"),
            ("3D tLSTM+CN (L=10)", ">99%", "317K", ">99%", "54K"),
        ],
    },
    "table3": {
        "title": "Table 3: test accuracy (%) on sequential MNIST / pMNIST",
        "source": f"{PAPER}, Table 3 (tab_mnist)",
        "columns": ("MNIST", "pMNIST"),
        "rows": [
            ("iRNN (Le et al. 2015)", "97.0", "82.0"),
            ("LSTM (Arjovsky et al. 2016)", "98.2", "88.0"),
            ("uRNN (Arjovsky et al. 2016)", "95.1", "91.4"),
            ("Full-capacity uRNN (Wisdom et al. 2016)", "96.9", "94.1"),
            ("sTANH (Zhang et al. 2016)", "98.1", "94.0"),
            ("BN-LSTM (Cooijmans et al. 2016)", "99.0", "95.4"),
            ("Dilated GRU (Chang et al. 2017)", "99.2", "94.6"),
            ("Dilated CNN (Oord et al. 2016) in Chang et al. 2017", "98.3", "96.7"),
            ("3D tLSTM+CN (L=3)", "99.2", "94.9"),
            ("3D tLSTM+CN (L=5)", "99.0", "95.7"),
        ],
    },
}

# The paper's settings for figures 3-5 (SPEC section 10), shown in our tables' notes.
PAPER_SETTINGS = {
    "wiki": "10M parameters, L = 1..4",
    "addition": "M = 400 (sLSTM budget), L = 1, 4, 7, 10",
    "memorization": "M = 100 (sLSTM budget), L = 1, 4, 7, 10",
    "mnist": "M = 100, L = 1, 3, 5",
    "pmnist": "M = 100, L = 1, 3, 5",
}
