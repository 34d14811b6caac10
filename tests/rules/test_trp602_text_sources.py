"""TRP602: strings that come from reading text (a file's contents, its lines, the keys of a JSON
document, regex matches) and the forms that carry them into a set whose order is then used."""

from __future__ import annotations

from conftest import reported


def rows(lint, source):
    result = lint(source, {"select": ["TRP602"]})
    assert not result.errors, result.errors
    return sorted(row for _, row, _ in reported(result, lint.root, "TRP602"))


def test_characters_and_lines_read_from_a_text_file(lint):
    source = """from pathlib import Path


def char_vocab(path):
    data = open(path, "r").read()
    chars = list(set(data))
    return {c: i for i, c in enumerate(chars)}


def char_vocab_in_with(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return list(set(text))


def lines_of(path):
    with open(path) as handle:
        return list(set(handle))


def page_chars(path):
    return list(set(Path(path).read_text().lower()))
"""
    assert rows(lint, source) == [6, 13, 18, 22]


def test_file_reads_that_are_not_hash_ordered_strings(lint):
    source = """def byte_values(path):
    with open(path, "rb") as handle:
        blob = handle.read()
    return list(set(blob))


def chosen_mode(path, mode):
    with open(path, mode) as handle:
        blob = handle.read()
    return list(set(blob))


def sorted_chars(path):
    chars = sorted(set(open(path).read()))
    return {c: i for i, c in enumerate(chars)}


def numbers(path):
    values = set(map(int, open(path).read().split()))
    return list(values)


def has_word(path, word):
    words = set(open(path).read().split())
    return word in words, len(words)
"""
    assert rows(lint, source) == []  # ints of bytes, an unknown mode, sorted, ints, membership


def test_json_keys_are_strings_and_its_values_unknown(lint):
    source = """import json


def label_names(path):
    with open(path) as handle:
        table = json.load(handle)
    return list(set(table.keys()))


def nested_names(text):
    names = set()
    for key, _ in json.loads(text)["classes"].items():
        names.add(key)
    return {n: i for i, n in enumerate(names)}


def label_values(path):
    with open(path) as handle:
        table = json.load(handle)
    return list(set(table.values())), list(set(table))
"""
    assert rows(lint, source) == [7, 14]  # values (and a document that may be a list): unknown


def test_strings_made_by_map_and_regex(lint):
    source = """import re


def tags(path):
    with open(path) as handle:
        stripped = set(map(str.strip, handle))
    return list(stripped)


def ids_as_text(ids):
    return list(set(map(str, ids)))


def tokens(text):
    return list(set(re.findall(r"[a-z]+", text)))


def trimmed(path):
    return list(set(map(lambda line: line.rstrip(), open(path))))
"""
    assert rows(lint, source) == [7, 11, 15, 19]


def test_accumulated_and_flattened_word_lists(lint):
    source = """import itertools


def by_plus(path):
    words = []
    with open(path) as handle:
        for line in handle:
            words += line.split()
    vocab = set(words)
    return list(vocab)


def by_union(texts):
    vocab = set().union(*[t.split() for t in texts])
    return {w: i for i, w in enumerate(vocab)}


def by_chain(lines):
    vocab = set(itertools.chain.from_iterable(l.split(",") for l in lines))
    return list(vocab)


def numbers_by_plus(rows):
    seen = []
    for r in rows:
        seen += [len(r)]
    return list(set(seen))
"""
    assert rows(lint, source) == [10, 15, 20]


def test_a_set_filled_by_a_callback_on_dataset_examples(lint):
    source = """def build(dataset):
    vocab = set()

    def collect(example):
        vocab.update(example["text"].split())
        return example

    dataset.map(collect)
    return {w: i for i, w in enumerate(vocab)}


def shadowed(dataset):
    vocab = set()

    def collect(example):
        vocab = set(example["ids"])
        return vocab

    dataset.map(collect)
    return list(vocab)
"""
    assert rows(lint, source) == [9]  # the second callback binds its own `vocab`


def test_a_set_rebound_as_a_list_of_itself(lint):
    source = """def word_index(path):
    words = set(open(path).read().split())
    words = list(words)
    return words.index("the")


def sorted_again(path):
    words = set(open(path).read().split())
    words = sorted(words)
    return words[0]
"""
    assert rows(lint, source) == [3]
