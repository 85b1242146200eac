#!/usr/bin/env python3
"""Writes the reference embeddings that scar-embed's correctness tests compare against.

An independent implementation (PyTorch sentence-transformers) embeds fixed texts with a model
folder; the Rust tests must agree to cosine >= 0.9999 on each. When the model declares a
`query` prompt (config_sentence_transformers.json), the same texts are embedded again as
queries, with that prompt.

    python3 -m pip install torch sentence-transformers   # once
    python3 scripts/reference-embeddings.py models/all-MiniLM-L6-v2 \
        > crates/scar-embed/tests/fixtures/minilm-reference.json
    scripts/make-bge-shaped-model large --layers 2
    python3 scripts/reference-embeddings.py models/bge-large-shape-2l bge-large-shape-2l \
        > crates/scar-embed/tests/fixtures/bge-large-shape-2l-reference.json
    scripts/make-bge-shaped-model m3 --layers 2
    python3 scripts/reference-embeddings.py models/bge-m3-shape-2l bge-m3-shape-2l \
        > crates/scar-embed/tests/fixtures/bge-m3-shape-2l-reference.json
"""
import json
import sys

from sentence_transformers import SentenceTransformer

LONG = " ".join(
    f"Clause {i}: the receiving party shall keep the disclosed information confidential "
    "and use it only for the purpose of evaluating the proposed transaction."
    for i in range(1, 40)
)

TEXTS = [
    "The cat sits on the mat.",
    "TCP uses a three-way handshake to establish a connection.",
    "Section 3.10.7.4: if SEG.SEQ = RCV.NXT, the window is 65,535 bytes!!!",
    "See https://www.rfc-editor.org/rfc/rfc9293 for the Details.",
    "Café naïve façade: Größe über 東京 — ünïcödé 🚀 text.",
    " ",
    "",
    "Personal data shall be processed lawfully, fairly and in a transparent manner in relation "
    "to the data subject. It shall be collected for specified, explicit and legitimate purposes.",
    LONG,
]


def cases(model: SentenceTransformer, prompt: str | None) -> list[dict]:
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, prompt=prompt)
    prefix = prompt or ""
    tokens = [len(model.tokenizer(prefix + t, truncation=False)["input_ids"]) for t in TEXTS]
    query = {} if prompt is None else {"query": True}
    return [
        {"text": t, **query, "untruncated_tokens": n, "embedding": [round(float(x), 7) for x in v]}
        for t, v, n in zip(TEXTS, vectors, tokens)
    ]


def main() -> None:
    model = SentenceTransformer(sys.argv[1], device="cpu")
    name = sys.argv[2] if len(sys.argv) > 2 else "sentence-transformers/all-MiniLM-L6-v2"
    query_prompt = model.prompts.get("query")
    json.dump(
        {
            "model": name,
            "generator": "sentence-transformers " + __import__("sentence_transformers").__version__,
            "max_seq_length": model.max_seq_length,
            "cases": cases(model, None) + (cases(model, query_prompt) if query_prompt else []),
        },
        sys.stdout,
        ensure_ascii=False,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
