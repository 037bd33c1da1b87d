"""Unit tests of the warm pytest runner's guard (worker/src/adapters/warm_pytest.py): what a
forked child may reuse of the server it was forked from, and where it must refuse."""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "src" / "adapters" / "warm_pytest.py"


@pytest.fixture(scope="module")
def warm():
    spec = importlib.util.spec_from_file_location("assay_warm_pytest", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no server starts: its `main()` runs as a script only
    return module


@pytest.fixture
def product(tmp_path, monkeypatch):
    """Writes modules into a fresh directory on sys.path; imports and returns one by name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def make(files, main):
        for name, source in files.items():
            (tmp_path / name).write_text(textwrap.dedent(source))
        names.extend(pathlib.Path(name).stem for name in files)
        importlib.invalidate_caches()
        return importlib.import_module(main)

    yield tmp_path, make
    for name in names:
        sys.modules.pop(name, None)


def hot_swap(warm, root, module_file, mutated_source):
    """What a fork of a session server does with a module-level mutant: the checks, then the
    mutated top-level code run again into the live module."""
    module = warm.Module(str(root), module_file, called={})
    swaps, mutated, check, _ = module.swaps(mutated_source.encode())
    assert check is not None, "a mutant of top-level code runs that code again"
    warm.apply_static(module, mutated, check)
    return module.module


def test_an_import_only_the_mutant_causes_is_refused_before_it_runs(warm, product, tmp_path):
    marker = tmp_path / "audit-ran"
    root, make = product
    source = '''
        RATE = 3
        if RATE > 5:
            import pricing_audit
    '''
    make({
        "pricing.py": source,
        # A module whose import has an effect outside itself: the fork must not cause it.
        "pricing_audit.py": f'''
            open({str(marker)!r}, "w").write("imported")
        ''',
    }, "pricing")
    with pytest.raises(warm.Fallback, match="it imports pricing_audit"):
        hot_swap(warm, root, "pricing.py", textwrap.dedent(source).replace("RATE = 3", "RATE = 7"))
    assert not marker.exists(), "the new import ran in the fork"
    assert "pricing_audit" not in sys.modules


def test_a_same_file_helper_reached_only_under_the_mutant_may_not_store_into_another_module(
        warm, product):
    root, make = product
    source = '''
        import pricing_registry

        RATE = 3


        def _register():
            pricing_registry.HANDLERS = pricing_registry.HANDLERS + 1


        if RATE > 5:
            _register()
    '''
    make({"pricing.py": source, "pricing_registry.py": "HANDLERS = 0\n"}, "pricing")
    registry = sys.modules["pricing_registry"]
    with pytest.raises(warm.Fallback, match="_register stores into pricing_registry"):
        hot_swap(warm, root, "pricing.py", textwrap.dedent(source).replace("RATE = 3", "RATE = 7"))
    assert registry.HANDLERS == 0, "the helper's store ran in the fork"


def test_a_same_file_helper_that_fills_the_modules_own_table_is_patched(warm, product):
    """The control of the test above: a helper that stores into the module's own dict is what
    a fresh import gives, so the fork patches the live module instead of falling back."""
    root, make = product
    source = '''
        RATES = {}
        RATE = 3


        def _fill():
            RATES["standard"] = RATE


        if RATE > 5:
            _fill()
    '''
    live = make({"pricing.py": source}, "pricing")
    table = live.RATES
    patched = hot_swap(warm, root, "pricing.py",
                       textwrap.dedent(source).replace("RATE = 3", "RATE = 7"))
    assert patched.RATE == 7
    assert patched.RATES == {"standard": 7}
    assert patched.RATES is table, "tables are patched in place, so every holder sees them"


LEDGER = '''
    from __future__ import annotations

    import operator


    class Ledger:
        def __init__(self, entries):
            self.__entries = list(entries)

        def total(self) -> int:
            return sum(operator.index(entry) for entry in self.__entries)


    class AuditedLedger(Ledger):
        def total(self) -> int:
            checked = super().total()
            return checked + 0


    try:
        def rounding(amount, step=5):
            return amount - amount % step
    except NameError:
        rounding = None
'''


def test_a_mutant_inside_one_function_body_compiles_alone_to_the_module_compiles_code(
        warm, product):
    """A mutant that changes one function's body is compiled from that function's text alone:
    the code objects are the whole module compile's (imports, `__future__`, private names and
    `super()` as in the module), and swapping them in changes what the live function does."""
    root, make = product
    source = textwrap.dedent(LEDGER)
    live = make({"ledger.py": LEDGER}, "ledger")
    module = warm.Module(str(root), "ledger.py", called={})
    for before, after in [("sum(operator.index(entry)", "max(operator.index(entry)"),
                          ("checked + 0", "checked - 1")]:
        mutated = source.replace(before, after).encode()
        alone = module.function_changes(mutated)
        assert alone is not None, f"{after} is inside one function's body"
        whole = []
        warm._pair(module.original, compile(mutated, module.filename, "exec",
                                            dont_inherit=True), whole)
        assert [(a, b, own) for a, b, own in whole if a.co_flags & warm.CO_OPTIMIZED] \
            == alone, "the same code objects as the module's compile"
    swaps, mutated_code, check, _ = module.swaps(
        source.replace("checked + 0", "checked - 1").encode())
    assert (mutated_code, check) == (None, None), "no top-level code runs again"
    for function, code in swaps:
        function.__code__ = code
    assert live.AuditedLedger([2, 3]).total() == 4


def test_a_mutant_outside_a_plain_function_body_is_compiled_with_its_module(warm, product):
    """A default argument, a line count that changes, or a function whose stubs cannot stand
    alone (defined inside `try:`) take the whole module's compile, as before."""
    root, make = product
    source = textwrap.dedent(LEDGER)
    make({"ledger.py": LEDGER}, "ledger")
    module = warm.Module(str(root), "ledger.py", called={})
    for before, after in [("def __init__(self, entries)", "def __init__(self, entries=())"),
                          ("checked + 0", "(checked\n                + 0)"),
                          ("amount - amount % step", "amount + amount % step")]:
        mutated = source.replace(before, after).encode()
        assert mutated != source.encode()
        assert module.function_changes(mutated) is None, after
    # The last one is still swapped, through the module's compile.
    swaps, _, check, _ = module.swaps(
        source.replace("amount - amount % step", "amount + amount % step").encode())
    assert check is None and [f.__name__ for f, _ in swaps] == ["rounding"]


TARIFF = '''
    import functools

    try:  # an optional backend, absent here: the search fails again when the import reruns
        from pricing_native_backend import fast_round
    except ImportError:
        fast_round = None


    def _logged(method):
        @functools.wraps(method)
        def wrapper(self, *args):
            return method(self, *args)
        return wrapper


    class Tariff:
        __slots__ = ("amount",)
        BANDS: tuple = ("standard", "reduced")
        LIMIT: int = 100
        HISTORY = ["2024"]

        def __init__(self, amount):
            self.amount = amount

        @_logged
        def capped(self):
            return min(self.amount, self.LIMIT)

        @classmethod
        def of(cls, amount, places=2):
            return cls(round(amount, places))
'''


def profiled_import(make, files, main):
    """Imports MAIN as the session server's collection does, recording what ran (its
    `called`): the class bodies run inside the module's import only."""
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        live = make(files, main)
    finally:
        profiler.disable()
    called = {}
    for entry in profiler.getstats():
        key = id(entry.code) if isinstance(entry.code, type(profiled_import.__code__)) \
            else entry.code
        called[key] = (entry.code, [sub.code for sub in entry.calls or ()])
    return live, called


def swap_class_body(warm, root, called, mutated_source):
    module = warm.Module(str(root), "tariff.py", called=called)
    swaps, mutated, check, _ = module.swaps(mutated_source.encode())
    assert check is not None, "a class body's mutant runs the top-level code again"
    warm.apply_static(module, mutated, check)
    return module.module


def test_a_class_constant_is_patched_on_the_live_class_every_holder_sees(warm, product):
    root, make = product
    live, called = profiled_import(make, {"tariff.py": TARIFF}, "tariff")
    tariff_class = live.Tariff
    held = tariff_class(250)  # an instance made before the swap, as a collected test holds
    patched = swap_class_body(warm, root, called,
                              textwrap.dedent(TARIFF).replace("LIMIT: int = 100", "LIMIT: int = 101"))
    assert patched.Tariff is tariff_class, "the live class is patched, never replaced"
    assert tariff_class.LIMIT == 101
    assert held.capped() == 101
    assert patched.fast_round is None


def test_a_dropped_method_leaves_the_live_class_as_a_fresh_import_would(warm, product):
    root, make = product
    live, called = profiled_import(make, {"tariff.py": TARIFF}, "tariff")
    held = live.Tariff(250)
    dropped = textwrap.dedent(TARIFF).replace(
        "    @_logged\n    def capped(self):\n        return min(self.amount, self.LIMIT)\n",
        "    pass\n\n\n")
    assert dropped != textwrap.dedent(TARIFF)
    swap_class_body(warm, root, called, dropped)
    assert not hasattr(live.Tariff, "capped")
    with pytest.raises(AttributeError):
        held.capped()


MONEY = '''
    class Money:
        def __init__(self, cents, currency):
            self.cents = cents
            self.currency = currency

        def __eq__(self, other):
            return (self.cents, self.currency) == (other.cents, other.currency)

        def __hash__(self):
            return hash((self.cents, self.currency))
'''
MONEY_WITHOUT_EQ = textwrap.dedent(MONEY).replace(
    "    def __eq__(self, other):\n"
    "        return (self.cents, self.currency) == (other.cents, other.currency)\n",
    "    pass\n\n")


def test_a_dropped_comparison_leaves_the_live_class_comparing_as_a_fresh_import_would(
        warm, product):
    root, make = product
    live, called = profiled_import(make, {"money.py": MONEY}, "money")
    held = live.Money(250, "EUR")
    assert held == live.Money(250, "EUR")
    module = warm.Module(str(root), "money.py", called=called)
    swaps, mutated, check, _ = module.swaps(MONEY_WITHOUT_EQ.encode())
    warm.apply_static(module, mutated, check)
    assert "__eq__" not in vars(live.Money)
    # The type's slot follows the class: equality is identity again, hashing unchanged.
    assert held != live.Money(250, "EUR") and held == held
    assert hash(held) == hash((250, "EUR"))


@pytest.mark.parametrize("collected, fallback", [
    # A test module's table of the method, read by name: it would keep the dropped one.
    ("from money import Money\n\nEQUALITY = Money.__eq__\n", "Money.__eq__ was read"),
    # A class of its own that defines `__eq__` binds the name, reading nothing of Money's.
    ("import money\n\n\nclass Ledger:\n    def __eq__(self, other):\n        return True\n", None),
])
def test_a_name_counts_as_read_while_collecting_only_where_code_reads_it(
        warm, product, collected, fallback):
    root, make = product
    live, called = profiled_import(
        make, {"money.py": MONEY, "test_money.py": collected}, "test_money")
    module = warm.Module(str(root), "money.py", called=called)
    swaps, mutated, check, _ = module.swaps(MONEY_WITHOUT_EQ.encode())
    if fallback:
        with pytest.raises(warm.Fallback, match=fallback):
            warm.apply_static(module, mutated, check)
    else:
        warm.apply_static(module, mutated, check)
        assert "__eq__" not in vars(sys.modules["money"].Money)


READINGS = '''
    class Meter:
        def __init__(self, reading):
            self._reading = reading

        @property
        def reading(self):
            """The last reading (read-only)."""
            return self._reading

        @reading.setter
        def reading(self, value):
            raise AttributeError("reading is read-only")
'''


READINGS_WITHOUT_SETTER = textwrap.dedent(READINGS).replace(
    "    @reading.setter\n    def reading(self, value):\n"
    "        raise AttributeError(\"reading is read-only\")\n", "\n\n\n")


def test_a_dropped_property_setter_leaves_the_live_getter_on_the_live_class(warm, product):
    root, make = product
    live, called = profiled_import(make, {"meters.py": READINGS}, "meters")
    meter_class, getter = live.Meter, live.Meter.reading.fget
    held = live.Meter(41)
    dropped = READINGS_WITHOUT_SETTER
    assert dropped != textwrap.dedent(READINGS)
    module = warm.Module(str(root), "meters.py", called=called)
    swaps, mutated, check, _ = module.swaps(dropped.encode())
    warm.apply_static(module, mutated, check)
    assert live.Meter is meter_class, "the live class is patched, never replaced"
    prop = vars(meter_class)["reading"]
    assert prop.fget is getter and prop.fset is None
    assert prop.__doc__ == "The last reading (read-only)."
    assert held.reading == 41
    with pytest.raises(AttributeError, match="has no setter"):
        held.reading = 5


def test_a_dropped_property_setter_that_ran_while_collecting_falls_back(warm, product):
    root, make = product
    # A module whose import tried the setter: its outcome shaped what collection built.
    files = {"meters.py": READINGS, "test_meters.py": '''
        from meters import Meter

        try:
            Meter(1).reading = 2
            WRITABLE = True
        except AttributeError:
            WRITABLE = False
    '''}
    live, called = profiled_import(make, files, "test_meters")
    dropped = READINGS_WITHOUT_SETTER
    module = warm.Module(str(root), "meters.py", called=called)
    swaps, mutated, check, _ = module.swaps(dropped.encode())
    with pytest.raises(warm.Fallback, match="Meter.reading ran during collection"):
        warm.apply_static(module, mutated, check)


def test_a_dropped_property_setter_falls_back_when_another_object_holds_the_property(
        warm, product):
    root, make = product
    files = {
        "meters.py": READINGS,
        # Another module's table of the class's properties, as a serializer builds it.
        "meter_fields.py": '''
            from meters import Meter

            FIELDS = {"reading": vars(Meter)["reading"]}
        ''',
    }
    live, called = profiled_import(make, files, "meters")
    import meter_fields  # noqa: F401
    prop = vars(live.Meter)["reading"]
    dropped = READINGS_WITHOUT_SETTER
    module = warm.Module(str(root), "meters.py", called=called)
    swaps, mutated, check, _ = module.swaps(dropped.encode())
    with pytest.raises(warm.Fallback, match="Meter.reading changes and a dict holds it"):
        warm.apply_static(module, mutated, check)
    assert vars(live.Meter)["reading"] is prop


ROUTE = '''
    class Route:
        SPEED = 30

        def minutes(self, km):
            return km * 60 / self.SPEED

        @classmethod
        def named(cls, name):
            return cls()


    #: The old name, kept for compatibility.
    Path = Route
'''


def test_a_method_dropped_from_a_class_bound_to_two_names_is_dropped_once(warm, product):
    root, make = product
    live, called = profiled_import(make, {"route.py": ROUTE}, "route")
    dropped = textwrap.dedent(ROUTE).replace(
        "    @classmethod\n    def named(cls, name):\n        return cls()\n", "    pass\n\n\n")
    assert dropped != textwrap.dedent(ROUTE)
    module = warm.Module(str(root), "route.py", called=called)
    swaps, mutated, check, _ = module.swaps(dropped.encode())
    warm.apply_static(module, mutated, check)
    assert live.Path is live.Route
    assert not hasattr(live.Route, "named")


# A class statement inside a block, so that a mutant can run the same statement twice with
# every function at the same line and column.
ROUTE_IN_BLOCK = '''
    Path = None
    if True:
        class Route:
            SPEED = 30

            def minutes(self, km):
                return km * 60 / self.SPEED
    Path = Route
'''


def test_a_mutant_that_parts_a_class_from_its_second_name_falls_back(warm, product):
    root, make = product
    live, called = profiled_import(make, {"route.py": ROUTE_IN_BLOCK}, "route")
    module = warm.Module(str(root), "route.py", called=called)
    # The one class statement run twice: `Path` keeps the first class, `Route` the second,
    # each the live class changed alike. Patching the live class once would be wrong for one.
    parted = textwrap.dedent(ROUTE_IN_BLOCK).replace("if True:", "while True:").replace(
        "SPEED = 30", "SPEED = 31").replace(
        "\nPath = Route", "\n    if Path is not None:\n        break\n    Path = Route")
    mutated = compile(parted, module.filename, "exec", dont_inherit=True)
    with pytest.raises(warm.Fallback, match="are one class but the mutant makes two"):
        warm.apply_static(module, mutated, module.static_check())
    assert live.Route.SPEED == 30 and live.Path is live.Route


AMOUNTS = '''
    from typing import List, TypeVar

    Amount = TypeVar("Amount", int, float, complex)


    def total(a: Amount, b: Amount) -> Amount:
        return a + b
'''


def test_a_changed_typevar_held_only_by_annotations_is_swapped_into_them(warm, product):
    import typing

    root, make = product
    live = make({"amounts.py": AMOUNTS}, "amounts")
    total = live.total
    hot_swap(warm, root, "amounts.py",
             textwrap.dedent(AMOUNTS).replace("int, float, complex", "int, float"))
    assert live.Amount.__constraints__ == (int, float)
    assert live.total is total, "the live function stays; its annotations change"
    assert typing.get_type_hints(total) == {"a": live.Amount, "b": live.Amount,
                                            "return": live.Amount}


@pytest.mark.parametrize("collected, fallback", [
    # Another module's own `Amount`, bound and read in its namespace: not the product's.
    ("import amounts\n\nAmount = float\n\n\ndef double(value: Amount) -> Amount:\n"
     "    return value * 2\n\n\nLIMIT = double(Amount(2.5))\n", None),
    # The product's own, imported by name: a holder the swap cannot vouch for.
    ("from amounts import Amount\n", "Amount was read while collecting"),
])
def test_a_typevar_counts_as_read_only_where_code_imports_or_reads_it_as_an_attribute(
        warm, product, collected, fallback):
    root, make = product
    live, called = profiled_import(
        make, {"amounts.py": AMOUNTS, "test_amounts.py": collected}, "test_amounts")
    module = warm.Module(str(root), "amounts.py", called=called)
    swaps, mutated, check, _ = module.swaps(
        textwrap.dedent(AMOUNTS).replace("int, float, complex", "int, float").encode())
    if fallback:
        with pytest.raises(warm.Fallback, match=fallback):
            warm.apply_static(module, mutated, check)
    else:
        warm.apply_static(module, mutated, check)
        assert sys.modules["amounts"].Amount.__constraints__ == (int, float)


def test_a_changed_typevar_inside_generic_aliases_is_swapped_into_them(warm, product):
    import typing

    root, make = product
    source = AMOUNTS + '''

    def totals(values: List[Amount], scale: Optional[Type[Amount]] = None) -> Dict[str, Amount]:
        return {"total": sum(values)}
'''
    source = source.replace("List, TypeVar", "Dict, List, Optional, Type, TypeVar")
    live = make({"amounts.py": source}, "amounts")
    totals = live.totals
    hot_swap(warm, root, "amounts.py",
             textwrap.dedent(source).replace("int, float, complex", "int, float"))
    assert totals is live.totals, "the live function stays; its annotations change"
    assert live.Amount.__constraints__ == (int, float)
    hints = typing.get_type_hints(totals)
    assert hints["values"] == typing.List[live.Amount]
    assert typing.get_args(hints["values"])[0] is live.Amount
    assert hints["scale"] == typing.Optional[typing.Type[live.Amount]]
    assert hints["return"] == typing.Dict[str, live.Amount]


def test_a_changed_typevar_in_an_alias_held_outside_annotations_falls_back(warm, product):
    root, make = product
    # A module-level alias: the live module would keep the old one where a fresh import
    # binds a new one.
    source = AMOUNTS + '''

    Amounts = List[Amount]
'''
    live = make({"amounts.py": source}, "amounts")
    amount = live.Amount
    with pytest.raises(warm.Fallback, match="Amount changes and a .* holds it"):
        hot_swap(warm, root, "amounts.py",
                 textwrap.dedent(source).replace("int, float, complex", "int, float"))
    assert live.Amount is amount and live.total.__annotations__["a"] is amount


def test_a_class_methods_changed_default_is_set_on_the_live_function(warm, product):
    root, make = product
    live, called = profiled_import(make, {"tariff.py": TARIFF}, "tariff")
    of = live.Tariff.of
    swap_class_body(warm, root, called,
                    textwrap.dedent(TARIFF).replace("places=2", "places=1"))
    assert live.Tariff.of.__func__ is of.__func__
    assert live.Tariff.of(2.345).amount == 2.3


def test_a_class_table_that_changes_and_is_mutable_falls_back(warm, product):
    root, make = product
    live, called = profiled_import(make, {"tariff.py": TARIFF}, "tariff")
    with pytest.raises(warm.Fallback, match="Tariff changes and is not plain data"):
        swap_class_body(warm, root, called,
                        textwrap.dedent(TARIFF).replace('["2024"]', '["2025"]'))
    assert live.Tariff.HISTORY == ["2024"]


def test_an_optional_backend_that_is_installed_but_was_not_imported_is_refused(
        warm, product, tmp_path):
    """The absent backend's search may run again; one that is there now would run its code."""
    marker = tmp_path / "backend-ran"
    root, make = product
    live, called = profiled_import(make, {"tariff.py": TARIFF}, "tariff")
    (tmp_path / "pricing_native_backend.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\nfast_round = round\n")
    importlib.invalidate_caches()
    with pytest.raises(warm.Fallback, match="it imports pricing_native_backend"):
        swap_class_body(warm, root, called,
                        textwrap.dedent(TARIFF).replace("LIMIT: int = 100", "LIMIT: int = 101"))
    assert not marker.exists(), "the backend's import ran in the fork"
    assert live.Tariff.LIMIT == 100


def test_a_class_body_whose_annotations_are_another_modules_dict_falls_back(warm, product):
    """Annotated names go into the body's own `__annotations__`, unless the body rebinds it."""
    root, make = product
    source = '''
        import pricing_notes


        class Tariff:
            __annotations__ = pricing_notes.NOTES
            LIMIT: int = 100
    '''
    live, called = profiled_import(
        make, {"tariff.py": source, "pricing_notes.py": "NOTES = {}\n"}, "tariff")
    notes = sys.modules["pricing_notes"].NOTES
    with pytest.raises(warm.Fallback, match="stores into __annotations__"):
        swap_class_body(warm, root, called,
                        textwrap.dedent(source).replace("LIMIT: int = 100", "LIMIT: int = 7"))
    assert notes == {"LIMIT": int}, "the other module's dict was written again in the fork"


class SessionServer:
    """The real server script, driven over its line protocol as the worker drives it."""

    def __init__(self, tmp_path, tree, args=()):
        rewrites = tmp_path / "rewrites"
        rewrites.mkdir()
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
                    "TMPDIR": str(tmp_path)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT.read_text(), str(rewrites)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd="/", env=self.env, text=True)
        assert self.answer() == {"ready": True}
        self.send({"session": {"cwd": str(tree), "env": self.env,
                               "args": ["-p", "no:cacheprovider", "-q", *args]}})
        started = self.answer()
        assert started.get("session") is True, started

    def send(self, message):
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def answer(self):
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def mutant(self, job_tree, module, limit_ms=None):
        request = {"cwd": str(job_tree), "env": self.env, "module": module, "select": [],
                   "stdout": str(job_tree / "stdout"), "stderr": str(job_tree / "stderr"),
                   "junitxml": str(job_tree / "report.xml")}
        if limit_ms is not None:
            request["limit_ms"] = limit_ms
        self.send(request)
        forked = self.answer()
        if "fallback" in forked:
            return forked
        assert "pid" in forked, forked
        return self.answer()

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


STORE = '''
def limit():
    return 10
'''


def session_trees(tmp_path, test_source):
    tree = tmp_path / "session" / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "store.py").write_text(textwrap.dedent(STORE))
    (tree / "tests" / "test_store.py").write_text(textwrap.dedent(test_source))

    def job(number, mutated):
        job_tree = tmp_path / f"job-{number}"
        shutil.copytree(tree, job_tree)
        (job_tree / "store.py").write_text(textwrap.dedent(mutated))
        return job_tree

    return tree, job


def test_a_file_written_beside_the_module_does_not_reach_the_next_mutant(tmp_path):
    tree, job = session_trees(tmp_path, '''
        import pathlib

        import store


        def test_first_visit_leaves_its_mark():
            marker = pathlib.Path(store.__file__).with_name("visited.txt")
            assert not marker.exists(), "another run's file"
            marker.write_text("seen")


        def test_limit():
            assert store.limit() >= 0
    ''')
    server = SessionServer(tmp_path, tree)
    try:
        first = server.mutant(job(1, STORE.replace("10", "11")), "store.py")
        # The fork's own result is not trusted either: another fork may have written first.
        assert first.get("retire") is True, first
        assert "visited.txt" in first["fallback"], first
        # The server ended instead of forking the next mutant into a tree that holds the file.
        assert server.answer() is None
        assert server.process.wait(timeout=10) == 0
    finally:
        server.close()


def test_a_session_whose_tests_leave_the_tree_alone_serves_every_mutant(tmp_path):
    """The control: reading the tree and writing to tmp_path change nothing the check sees."""
    tree, job = session_trees(tmp_path, '''
        import pathlib

        import store


        def test_limit(tmp_path):
            (tmp_path / "scratch.txt").write_text("private to the test")
            assert pathlib.Path(store.__file__).read_text()
            assert store.limit() == 10
    ''')
    server = SessionServer(tmp_path, tree)
    try:
        survived = server.mutant(job(1, STORE.replace("10", "10 if True else 0")), "store.py")
        killed = server.mutant(job(2, STORE.replace("10", "11")), "store.py")
        assert survived == {"exit": 0}, survived
        assert killed == {"exit": 1}, killed
    finally:
        server.close()


def test_a_hanging_mutant_is_killed_by_the_server_at_its_limit_and_the_next_one_still_runs(tmp_path):
    """The server, not the worker, ends a fork at the job's limit: inside the sandbox's PID
    namespace the fork's number is not a host process, so only the server can signal it."""
    tree, job = session_trees(tmp_path, '''
        import store


        def test_limit():
            assert store.limit() == 10
    ''')
    server = SessionServer(tmp_path, tree)
    try:
        started = time.monotonic()
        hung = server.mutant(job(1, STORE.replace("return 10", "while True:\n        pass")),
                             "store.py", limit_ms=500)
        took = time.monotonic() - started
        assert hung.get("timed_out") is True, hung
        assert hung["exit"] < 0, hung
        assert took < 5, took
        assert server.mutant(job(2, STORE.replace("10", "11")), "store.py", limit_ms=30_000) \
            == {"exit": 1}
    finally:
        server.close()


# A module-level table whose mutant raises as the module's top-level code runs.
RATES = '''
def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)


RATES = {"EUR": 1.0, "USD": 1.1}
UNIT = RATES["EUR"]
LEVELS = depth(3)


def rate(code):
    return RATES[code]
'''


def test_a_module_whose_mutant_fails_at_import_fails_collection_in_the_fork(tmp_path):
    """The fork reports what a fresh session would: the module fails to collect, twice, so the
    kill is confirmed in the job, and no test runs."""
    tree = tmp_path / "session" / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "rates.py").write_text(RATES)
    (tree / "tests" / "test_rates.py").write_text(textwrap.dedent('''
        import rates


        def test_euro_is_the_unit():
            assert rates.rate("EUR") == 1.0
    '''))

    def job(number, mutated):
        job_tree = tmp_path / f"job-{number}"
        shutil.copytree(tree, job_tree)
        (job_tree / "rates.py").write_text(mutated)
        return job_tree

    server = SessionServer(tmp_path, tree, ["--junitxml={report}"])
    try:
        broken = job(1, RATES.replace('RATES["EUR"]', 'RATES["XXEURXX"]'))
        assert server.mutant(broken, "rates.py") == {"exit": 2}
        report = (broken / "report.xml").read_text()
        assert report.count('message="collection failure"') == 2, report
        assert "rates.py[assay-rerun]" in report, report
        assert "test_euro_is_the_unit" not in report, report
        assert "rates.py:7: in &lt;module&gt;" in report, report
        assert "KeyError: 'XXEURXX'" in report, report
        # A mutant whose top-level code runs cleanly still runs its tests in a fork.
        kept = job(2, RATES.replace('"EUR": 1.0', '"EUR": 2.0'))
        assert server.mutant(kept, "rates.py") == {"exit": 1}
        assert "test_euro_is_the_unit" in (kept / "report.xml").read_text()
        # The interpreter's own limits are no verdict of the code's: a fresh session decides.
        deep = job(3, RATES.replace("depth(3)", "depth(-3)"))
        assert "fails at import (RecursionError)" in server.mutant(deep, "rates.py").get(
            "fallback", ""), "a recursion limit is the fork's frames, not the mutant's"
    finally:
        server.close()


def test_a_module_that_fails_only_when_run_again_gets_a_fresh_session(tmp_path):
    """Code that tells a run again from its import (its own module already holds its names)
    could fail every mutant in the fork; its own code fails there too, so no kill is taken."""
    tree = tmp_path / "session" / "tree"
    (tree / "tests").mkdir(parents=True)
    telling = "import sys\n\nif \"rate\" in sys.modules[__name__].__dict__:\n" \
              "    raise RuntimeError(\"imported twice\")\n" + RATES
    (tree / "rates.py").write_text(telling)
    (tree / "tests" / "test_rates.py").write_text(
        "import rates\n\n\ndef test_euro_is_the_unit():\n    assert rates.UNIT == 1.0\n")
    job_tree = tmp_path / "job-1"
    shutil.copytree(tree, job_tree)
    (job_tree / "rates.py").write_text(telling.replace('"USD": 1.1', '"USD": 1.2'))
    server = SessionServer(tmp_path, tree, ["--junitxml={report}"])
    try:
        answer = server.mutant(job_tree, "rates.py")
        assert "the unmutated module fails when run again" in answer.get("fallback", ""), answer
        assert not (job_tree / "report.xml").exists()
    finally:
        server.close()


INVOICE = '''
class Invoice:
    def __init__(self, amount, rate):
        self.amount = amount
        self.rate = rate

    def total(self):
        return self.amount * self.rate
'''

# A parametrize list of invoices, built while collecting: `Invoice.__init__` runs then.
INVOICE_CASES = '''
    import pytest

    from ledger import Invoice

    CASES = [Invoice(100, 2), Invoice(5, 3)]


    @pytest.mark.parametrize("invoice", CASES)
    def test_rate_is_kept(invoice):
        assert invoice.rate in (2, 3)
'''

INVOICE_TOTAL = '''
    from ledger import Invoice


    def test_total():
        assert Invoice(100, 2).total() == 200
'''


def invoice_trees(tmp_path, files):
    tree = tmp_path / "session" / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "ledger.py").write_text(INVOICE)
    for name, source in files.items():
        (tree / "tests" / name).write_text(textwrap.dedent(source))

    def job(number, mutated):
        job_tree = tmp_path / f"job-{number}"
        shutil.copytree(tree, job_tree)
        (job_tree / "ledger.py").write_text(mutated)
        return job_tree

    return tree, job


def test_a_function_that_ran_while_collecting_is_killed_in_a_fork_by_the_other_tests(tmp_path):
    tree, job = invoice_trees(tmp_path, {"test_cases.py": INVOICE_CASES,
                                         "test_total.py": INVOICE_TOTAL})
    server = SessionServer(tmp_path, tree, ["--junitxml={report}"])
    try:
        killed_tree = job(1, INVOICE.replace("self.amount = amount", "self.amount = -amount"))
        # Forked (no fallback), killed by test_total; the held-back items never ran there.
        assert server.mutant(killed_tree, "ledger.py") == {"exit": 1}
        report = (killed_tree / "report.xml").read_text()
        assert 'name="test_total"' in report and "test_rate_is_kept" not in report, report
        # Only the held-back items would catch this one: the fork's run proves nothing, so the
        # job goes to a fresh session, and the fork's report is not left for it.
        missed_tree = job(2, INVOICE.replace("self.rate = rate", "self.rate = rate + 1")
                          .replace("self.amount * self.rate", "self.amount * (self.rate - 1)"))
        missed = server.mutant(missed_tree, "ledger.py")
        assert "collecting test_cases.py ran the mutated code: no other test failed" \
            in missed.get("fallback", ""), missed
        assert not (missed_tree / "report.xml").exists()
    finally:
        server.close()


def test_a_function_that_ran_while_collecting_falls_back_where_its_results_may_escape(tmp_path):
    # Another test module holds what the collecting module built: held back alone, its
    # items would still run with the unmutated function's invoices.
    reuse = '''
        from test_cases import CASES


        def test_reused():
            assert len(CASES) == 2
    '''
    tree, job = invoice_trees(tmp_path, {"test_cases.py": INVOICE_CASES,
                                         "test_total.py": INVOICE_TOTAL,
                                         "test_reuse.py": reuse})
    server = SessionServer(tmp_path, tree)
    try:
        answer = server.mutant(job(1, INVOICE.replace("self.amount = amount", "self.amount = -amount")),
                               "ledger.py")
        assert "CASES is held by test_reuse" in answer.get("fallback", ""), answer
    finally:
        server.close()


@pytest.mark.parametrize("init, why", [
    # A registry the function fills while collecting: the other tests would see it filled
    # by the unmutated code.
    ("        REGISTRY.append(self)\n", "beside <method 'append' of 'list' objects>"),
    ("        Invoice.last = self\n", "stores into Invoice"),
])
def test_a_function_that_stores_outside_its_instance_while_collecting_falls_back(
        tmp_path, init, why):
    ledger = "REGISTRY = []\n\n" + INVOICE.replace("        self.rate = rate\n",
                                                     "        self.rate = rate\n" + init)
    tree, job = invoice_trees(tmp_path, {"test_cases.py": INVOICE_CASES,
                                         "test_total.py": INVOICE_TOTAL})
    (tree / "ledger.py").write_text(ledger)
    server = SessionServer(tmp_path, tree)
    try:
        answer = server.mutant(job(1, ledger.replace("self.amount = amount", "self.amount = -amount")),
                               "ledger.py")
        assert why in answer.get("fallback", ""), answer
        assert "ran during collection" in answer["fallback"], answer
    finally:
        server.close()


def fresh_run(tmp_path, tree, ids, narrow):
    """One mutant run in a fork of a plain server: the order its tests ran in, the files pytest
    was handed, and the server's answers."""
    record = tree / "ran.txt"
    record.write_text("")
    rewrites = tmp_path / "rewrites"
    rewrites.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-c", SCRIPT.read_text(), str(rewrites)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd="/", env=env, text=True)
    try:
        assert json.loads(server.stdout.readline()) == {"ready": True}
        args = ["-x", "-p", "no:cacheprovider", f"--junitxml={tree / 'report.xml'}", "-q"] + ids
        server.stdin.write(json.dumps({
            "cwd": str(tree), "env": env, "args": args, "narrow": narrow,
            "stdout": str(tree / "stdout"), "stderr": str(tree / "stderr")}) + "\n")
        server.stdin.flush()
        forked, ended = (json.loads(server.stdout.readline()) for _ in range(2))
    finally:
        server.kill()
        server.wait(timeout=10)
    assert "pid" in forked, forked
    ran, handed = [], []
    for line in record.read_text().splitlines():
        kind, value = line.split(" ", 1)
        (ran if kind == "ran" else handed).append(value)
    return ran, handed, ended


NARROWED_TESTS = {
    "conftest.py": '''
        import pathlib

        RECORD = pathlib.Path(__file__).with_name("ran.txt")


        def pytest_configure(config):
            with RECORD.open("a") as record:
                record.write(f"args {' '.join(map(str, config.args))}\\n")


        def pytest_runtest_call(item):
            with RECORD.open("a") as record:
                record.write(f"ran {item.nodeid}\\n")
    ''',
    "tests/test_rates.py": '''
        import pytest


        def test_standard():
            pass


        @pytest.mark.parametrize("band", [1, 2])
        def test_banded(band):
            pass


        def test_unnamed():
            pass
    ''',
    "tests/test_totals.py": '''
        def test_sum():
            pass


        def test_rounding():
            pass
    ''',
}


def test_a_mutants_fresh_run_names_each_file_once_and_runs_exactly_its_node_ids(tmp_path):
    """Narrowed, pytest is handed each file once and runs the named ids in their order (as
    named, pytest resolves each of hundreds of ids alone); an id the files do not collect
    exactly (a parametrized test named without its parameters) runs the job as named."""
    tree = tmp_path / "tree"
    for name, source in NARROWED_TESTS.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(textwrap.dedent(source))
    ids = ["tests/test_totals.py::test_rounding", "tests/test_rates.py::test_banded[2]",
           "tests/test_rates.py::test_standard", "tests/test_totals.py::test_sum"]
    as_named = fresh_run(tmp_path, tree, ids, narrow=False)
    narrowed = fresh_run(tmp_path, tree, ids, narrow=True)
    assert as_named[0] == narrowed[0] == ids, "the same tests, in the named order"
    assert as_named[2] == narrowed[2] == {"exit": 0}
    assert as_named[1] == [" ".join(ids)]
    assert narrowed[1] == ["tests/test_totals.py tests/test_rates.py"], "each file once"

    loose = ["tests/test_totals.py::test_sum", "tests/test_rates.py::test_banded"]
    ran, handed, ended = fresh_run(tmp_path, tree, loose, narrow=True)
    assert ran == ["tests/test_totals.py::test_sum", "tests/test_rates.py::test_banded[1]",
                   "tests/test_rates.py::test_banded[2]"], "both parameters, as pytest selects"
    assert handed == ["tests/test_totals.py tests/test_rates.py", " ".join(loose)], \
        "the narrowed fork stopped after collecting, and the job ran as named"
    assert ended == {"exit": 0}
