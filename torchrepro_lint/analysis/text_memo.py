"""Answers about a whole file's text, remembered by (text, word).

A process that looks at the same texts again and again (the language server, once per edit over
the whole project) asks the same questions of each: does this file mention `parameters`, may
this rule fire here. A remembered answer costs the text's hash, which Python caches on the
string, and an identity check of the same string object; a new text is asked once.
"""

from __future__ import annotations

from typing import Callable


class TextMemo:
    """`answer(text, word)`, remembered; forgotten all at once when `kept` answers are held."""

    def __init__(self, answer: Callable[[str, str], bool], kept: int = 65536) -> None:
        self.answer, self.kept = answer, kept
        self._answers: dict[tuple[str, str], bool] = {}

    def __call__(self, text: str, word: str) -> bool:
        key = (text, word)
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) >= self.kept:
                self._answers.clear()
            found = self._answers[key] = self.answer(text, word)
        return found


# Whether a text contains a word (as a substring): modules_mentioning's filter, asked of every
# module for every word a result read, in every run of the language server.
contains = TextMemo(lambda text, word: word in text)
