"""Averaged word vectors: the embedding of a text is the mean of the GloVe
vectors of its words. Shared by make_data.py (which keeps the vectors of
exactly these words) and run.py (which averages them)."""

import re

import numpy as np

# Words that carry no topic: without them, every average is pulled towards
# the same few vectors of "the", "of" and "for".
STOP = frozenset("""a an and at by for from in into is it its of on or to
the with as be but not that this than up down""".split())

# GloVe's vocabulary: lowercase letters, an inner ' or - allowed.
WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")
TICKER = re.compile(r"<[^>]*>")   # "<CPML>": a stock symbol, not a word


def tokens(text):
    text = TICKER.sub(" ", text.lower())
    return [w for w in WORD.findall(text) if w not in STOP]


def embed(texts, vocab):
    """float32 rows of the mean vectors of texts; vocab maps word -> vector.
    Returns (rows, words used per text); a text with no known word gets a
    zero row and 0 (the caller leaves it out: its cosine is undefined)."""
    dim = len(next(iter(vocab.values())))
    out = np.zeros((len(texts), dim), dtype=np.float32)
    used = []
    for i, t in enumerate(texts):
        vecs = [vocab[w] for w in tokens(t) if w in vocab]
        if vecs:
            out[i] = np.mean(np.asarray(vecs, dtype=np.float64), axis=0)
        used.append(len(vecs))
    return out, used
