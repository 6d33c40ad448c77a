#!/usr/bin/python3
"""Trains a small SentencePiece BPE model with the sentencepiece library
(python3-sentencepiece, run with /usr/bin/python3) and writes two fixtures:

  tests/data/tokenizer/spm_small.vocab.txt     one line per piece: type<TAB>score<TAB>hex(piece)
  tests/data/tokenizer/spm_small.expected.txt  hex(text)<TAB>ids the library produces

tests/test_tokenizer.cpp rebuilds a ModelProto from the vocab file through our
own protobuf writer and must reproduce the library's ids: the ids here come
from the sentencepiece library itself, loaded from the model it trained.
"""
import io
import os
import sys

import sentencepiece as spm

CORPUS = """\
Once upon a time there was a little robot that liked to count stars.
Every night it counted the stars over the hills and wrote the numbers down.
The robot counted one hundred, two hundred, three hundred stars and more.
def count(stars):
\treturn len([s for s in stars if s.bright])
Les étoiles brillent dans le ciel de la nuit.
Die Sterne leuchten am Himmel, und der Roboter zählt sie alle.
星星在夜空中闪烁。机器人数星星。
The end of the story is not the end of the stars.
"""

SAMPLES = [
    "Hello world",
    "The robot counted the stars.",
    "  two leading spaces and  double  inner",
    "trailing space ",
    "def count(stars):\n\treturn 42",
    "Les étoiles brillent",
    "Der Roboter zählt",
    "星星在夜空中",
    "emoji 😀 and ❤️ via bytes",
    "Ünïcödé ßtraße",
    "",
    "tabs\tand\nnewlines\n",
    "<s> is plain text here",
]

TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_UNUSED, TYPE_BYTE = 1, 2, 3, 5, 6


def train() -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS.splitlines()),
        model_writer=model,
        model_type="bpe",
        vocab_size=420,
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        hard_vocab_limit=False,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2,
    )
    return model.getvalue()


def piece_type(sp, i: int) -> int:
    if sp.is_unknown(i):
        return TYPE_UNKNOWN
    if sp.is_control(i):
        return TYPE_CONTROL
    if sp.is_byte(i):
        return TYPE_BYTE
    if sp.is_unused(i):
        return TYPE_UNUSED
    return TYPE_NORMAL


def main() -> None:
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer")
    sp = spm.SentencePieceProcessor(model_proto=train())
    with open(os.path.join(out_dir, "spm_small.vocab.txt"), "w") as f:
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i).encode("utf-8").hex()
            f.write(f"{piece_type(sp, i)}\t{sp.get_score(i)!r}\t{piece}\n")
    with open(os.path.join(out_dir, "spm_small.expected.txt"), "w") as f:
        for text in SAMPLES:
            ids = sp.encode(text)
            assert sp.decode(ids) == text, text
            f.write(text.encode("utf-8").hex() + "\t" + " ".join(map(str, ids)) + "\n")
    print(f"{sp.get_piece_size()} pieces, {len(SAMPLES)} samples", file=sys.stderr)


if __name__ == "__main__":
    main()
