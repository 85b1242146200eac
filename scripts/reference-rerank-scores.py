#!/usr/bin/env python3
"""Writes the reference scores that scar-embed's cross-encoder test compares against.

Two independent implementations score fixed (question, passage) pairs with a cross-encoder
folder: transformers' AutoModelForSequenceClassification (the logits) and sentence-transformers'
CrossEncoder (its `predict`, without an activation). They must agree with each other to 1e-5;
the Rust test must agree with them to 1e-4.

    scripts/make-bge-shaped-model ms-marco-minilm --cross-encoder
    ~/.cache/bench-venv/bin/python scripts/reference-rerank-scores.py models/ms-marco-minilm-shape \
        > crates/scar-embed/tests/fixtures/ms-marco-minilm-shape-reference.json
    scripts/make-bge-shaped-model bge-reranker-base --cross-encoder --layers 2
    ~/.cache/bench-venv/bin/python scripts/reference-rerank-scores.py \
        models/bge-reranker-base-shape-2l \
        > crates/scar-embed/tests/fixtures/bge-reranker-base-shape-2l-reference.json
"""
import json
import sys

import torch
from sentence_transformers import CrossEncoder
from transformers import AutoModelForSequenceClassification, AutoTokenizer

LONG = " ".join(
    f"Clause {i}: the receiving party shall keep the disclosed information confidential "
    "and use it only for the purpose of evaluating the proposed transaction."
    for i in range(1, 60)
)

QUESTIONS = [
    "What does it cost to take my kayak on the ferry?",
    "How does TCP establish a connection?",
    "Größe über 東京?",
]

PASSAGES = [
    "A sea kayak costs 8 euros a crossing, paid when you book.",
    "TCP uses a three-way handshake to establish a connection.",
    "Section 3.10.7.4: if SEG.SEQ = RCV.NXT, the window is 65,535 bytes!!!",
    "Café naïve façade: Größe über 東京 — ünïcödé 🚀 text.",
    " ",
    LONG,
]


def main(folder: str) -> None:
    pairs = [(q, p) for q in QUESTIONS for p in PASSAGES]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        batch = tokenizer([q for q, _ in pairs], [p for _, p in pairs], padding=True,
                          truncation=True, max_length=512, return_tensors="pt")
        logits = model(**batch).logits[:, 0].tolist()
    tokens = [len(tokenizer(q, p, truncation=True, max_length=512)["input_ids"]) for q, p in pairs]

    cross_encoder = CrossEncoder(folder, max_length=512, activation_fn=torch.nn.Identity(),
                                 device="cpu")
    predicted = cross_encoder.predict(pairs, batch_size=8).tolist()
    worst = max(abs(a - b) for a, b in zip(logits, predicted))
    assert worst <= 1e-5, f"transformers and sentence-transformers differ by {worst}"

    cases = [
        {"question": q, "passage": p, "tokens": n, "score": round(score, 6)}
        for (q, p), n, score in zip(pairs, tokens, logits)
    ]
    json.dump({"model": folder, "cases": cases}, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
