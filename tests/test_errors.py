"""The error hierarchy: carried data, unknown keywords, and pickling (errors cross processes)."""
from __future__ import annotations

import concurrent.futures
import inspect
import pickle

import numpy as np
import pytest

from regime_dash import errors

CLASSES = [c for _, c in inspect.getmembers(errors, inspect.isclass)
           if issubclass(c, errors.RegimeDashError) and c.__module__ == errors.__name__]


def _carried(cls: type) -> list[str]:
    return [n for k in reversed(cls.__mro__) for n in vars(k).get("__annotations__", {})]


def _sample(cls: type) -> errors.RegimeDashError:
    """An instance of ``cls`` with every carried field set away from its default."""
    if cls is errors.ParseError:
        return errors.ParseError("not JSON", line=7, path="runs/a.jsonl")
    if cls is errors.StreamErrors:
        return errors.StreamErrors([errors.StreamError("rewards has NaN", field="rewards", value=3),
                                    errors.StreamError("lots < 0", field="lots", value=-1)])
    data = {name: f"{name}-value" for name in _carried(cls)}
    return cls(f"{cls.__name__} happened", **data)


def _same(a, b) -> bool:
    """Equal as errors are: type, str, args and carried data (nested errors alike)."""
    if isinstance(a, BaseException) or isinstance(b, BaseException):
        return (type(a) is type(b) and str(a) == str(b) and a.args == b.args
                and vars(a).keys() == vars(b).keys() and all(_same(vars(a)[k], vars(b)[k]) for k in vars(a)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_every_error_class_is_sampled():
    names = {c.__name__ for c in CLASSES}
    assert {"RegimeDashError", "ValidationError", "ParseError", "StreamErrors", "ExportError"} <= names
    for cls in CLASSES:
        e = _sample(cls)
        assert type(e) is cls
        for name in _carried(cls):
            assert name in vars(e)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_pickle_round_trip_keeps_type_message_args_and_data(cls):
    e = _sample(cls)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls
    assert str(back) == str(e)
    assert back.args == e.args
    assert vars(back).keys() == vars(e).keys()
    assert _same(back, e)


def test_pickle_round_trip_of_parse_and_stream_errors_keeps_their_fields():
    p = pickle.loads(pickle.dumps(errors.ParseError("bad float", line=12, path="d.jsonl")))
    assert (p.line, p.reason, p.path, str(p)) == (12, "bad float", "d.jsonl", "d.jsonl:12: bad float")
    s = pickle.loads(pickle.dumps(_sample(errors.StreamErrors)))
    assert (s.field, s.value) == ("rewards", 3)
    assert [type(x) for x in s.errors] == [errors.StreamError, errors.StreamError]
    assert [x.field for x in s.errors] == ["rewards", "lots"]


def test_pickle_keeps_numpy_values_and_every_protocol():
    e = errors.ValidationError("bad shape", field="rewards", value=np.arange(3, dtype=np.float32))
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(e, protocol=proto))
        assert back.field == "rewards" and back.value.dtype == np.float32
        np.testing.assert_array_equal(back.value, e.value)


def _raise_parse_error(line: int) -> None:
    raise errors.ParseError("not an object", line=line, path="w.jsonl")


def test_error_raised_in_another_process_keeps_its_type():
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        with pytest.raises(errors.ParseError) as info:
            pool.submit(_raise_parse_error, 5).result(timeout=60)
    assert (info.value.line, info.value.path) == (5, "w.jsonl")


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="carries no fild"):
        errors.ValidationError("x", fild="a")
