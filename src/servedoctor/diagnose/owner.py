"""Whose code raised it: the package behind the innermost frame, and the engine's release.

A Python exception that says one package does not fit its caller (a ``TypeError`` about a
signature, an ``AttributeError`` for a name that moved, a ``ValueError`` from a check that
changed) was raised by code of one distribution, found from the frame's site-packages path.
When that distribution is not the engine, its release is a suspect: the confirmed fix in
such threads is most often that package at the version the engine was written against.
When the engine's own code raised, or a failure no rule explains happened inside it, the
engine's release is the suspect: a regression, fixed one release later or absent one
before. Both are hypotheses with the evidence they came from, never a guessed version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servedoctor.engines import all_engines, engine_distribution
from servedoctor.knowledge.facts import (
    distribution_of_module,
    distribution_of_path,
    is_api_error,
    is_known_module,
    package_of_cxx_type,
    package_of_kernel_library,
    passes_through,
)
from servedoctor.knowledge.versionwords import (
    ANOTHER_RELEASE,
    release_after,
    release_before,
    required_by,
)
from servedoctor.logs.model import Event, Frame
from servedoctor.model import Change, Hypothesis

#: Confidence of "the raising package's release": above the class fallbacks (generic
#: switches), below any rule that recognised the message.
RAISER_CONFIDENCE = 0.32
#: Confidence of "the engine's release", for a failure inside the engine's own code that no
#: rule recognised: below the raising package's release and every rule's change, above the
#: class's generic switches. Measured over 1200 public logs (each corpus left out of its
#: own precedents): four more confirmed engine-release fixes among the first three than a
#: fill-in everywhere (0.09), none moved out; 0.2 or 0.3 each moved one out.
ENGINE_RELEASE_CONFIDENCE = 0.25
#: ... and once a rule recognised the message: a fill-in after the rule's own changes (a
#: refused flag's fix is its spelling, an out-of-memory's a smaller setting).
ENGINE_RELEASE_FILL_IN = 0.09
#: Confidence of "the located kernel library's release": above the class's third generic
#: switch. Kernel libraries change kernels every release, and in the public threads the
#: confirmed fix for a fault located in one is most often another release of it.
CULPRIT_RELEASE_CONFIDENCE = 0.22


#: Classes where an engine release is a plausible cause; a taken port, a missing package or
#: an old driver is not fixed by another release of the engine.
RELEASE_CLASSES = frozenset(
    {
        "other",
        "cuda_oom",
        "illegal_memory_access",
        "device_assert",
        "nccl_error",
        "hang",
        "model_unsupported",
        "numerical",
        "arch_unsupported",
        "triton_error",
        "cublas_error",
    }
)


#: the frame's own statement raised the exception (not a native call failing under it)
_RAISE_STATEMENT = re.compile(r"^\s*raise\s+\w")


@dataclass(frozen=True, slots=True)
class Raiser:
    distribution: str
    frame: Frame


def raiser(frames: tuple[Frame, ...]) -> Raiser | None:
    """The innermost frame under site-packages whose package does not only pass calls on;
    a package that usually does (uvloop, torch) counts when its own ``raise`` statement is
    the innermost frame."""
    for depth, frame in enumerate(reversed(frames)):
        dist = distribution_of_path(frame.file.replace("\\", "/"))
        if dist is None:
            continue
        if passes_through(dist) and not (depth == 0 and _RAISE_STATEMENT.match(frame.code)):
            continue
        return Raiser(dist, frame)
    return None


#: "Class.method() got an unexpected keyword argument", "f() takes 2 positional arguments"
_CALLEE = re.compile(r"(?P<qual>[A-Za-z_][\w.]*)\(\) (?:got|takes|missing|received)\b")
_NOT_MODULES = frozenset({"self", "cls", "super"})


def callee_package(frames: tuple[Frame, ...], message: str) -> Raiser | None:
    """The package of the function a ``TypeError`` about arguments names, when the frame that
    called it spells ``module.Class.method(``: the caller was written for another API. With
    no frame, a class named after a package it belongs to (``nixl_agent_config.__init__()``
    → nixl) says the same."""
    m = _CALLEE.search(message)
    if m is None:
        return None
    qual = m.group("qual")
    if not frames:
        return _named_after_package(qual)
    inner = frames[-1]
    call = re.search(r"(?<![\w.])([A-Za-z_]\w*)\." + re.escape(qual) + r"\s*\(", inner.code)
    if call is None or call.group(1) in _NOT_MODULES:
        return None
    module = call.group(1)
    if "." not in qual and not is_known_module(module):
        return None  # ``obj.method(`` may be any object; ``module.Class.method(`` is a module
    dist = distribution_of_module(module)
    return Raiser(dist, inner) if dist and not passes_through(dist) else None


def _named_after_package(qual: str) -> Raiser | None:
    """``pkg_thing.method`` or ``pkg.Thing.method`` whose first word is an import name the
    package table lists (words shorter than four letters say too little)."""
    head = qual.split(".")[0]
    word = head if is_known_module(head) else head.split("_")[0]
    if len(word) < 4 or not is_known_module(word):
        return None
    dist = distribution_of_module(word)
    if dist is None or passes_through(dist):
        return None
    return Raiser(dist, Frame(file="", line=0, func=qual, code=""))


def _raised_by_its_code(found: Raiser | None, exc_type: str | None) -> bool:
    """A ``RuntimeError`` that a third-party package's own ``raise`` statement threw: that
    package refused the way it is used (uvloop's "no current event loop")."""
    return (
        found is not None
        and str(exc_type or "").rsplit(".", 1)[-1] == "RuntimeError"
        and bool(_RAISE_STATEMENT.match(found.frame.code))
    )


def owner_hypotheses(
    frames: tuple[Frame, ...],
    *,
    exc_type: str | None,
    message: str = "",
    engine: str | None,
    engine_version: str | None,
) -> list[Hypothesis]:
    """The raising package's release (an API error in a third-party package), or the package
    whose API the engine's own call no longer fits."""
    engine_dist = engine_distribution(engine)
    found = raiser(frames)
    if not is_api_error(exc_type) and not _raised_by_its_code(found, exc_type):
        return []
    called = None
    if found is None or found.distribution == engine_dist:
        found = called = callee_package(frames, message)
    if found is None or found.distribution == engine_dist:
        return []
    file = found.frame.file.replace(chr(92), "/").split("-packages/")[-1]
    where = f"{file}:{found.frame.func}" if file else found.frame.func
    wanted = required_by(engine, engine_version)
    cause = (
        f"The call at {where} does not fit the installed {found.distribution}'s API "
        f"({exc_type}): a release the server was not written for."
        if called
        else f"{found.distribution}'s own code raised {exc_type} ({where}): the installed "
        f"{found.distribution} is not the release the server was written against."
    )
    return [
        Hypothesis(
            id="OWNER.1",
            cause=cause,
            confidence=RAISER_CONFIDENCE,
            changes=(Change(kind="package", name=found.distribution, value=wanted),),
            why=f"{exc_type} {'about a call into' if called else 'raised by'} {found.distribution}",
            references=(
                "https://packaging.python.org/en/latest/specifications/dependency-specifiers/",
            ),
            rule=None,
        )
    ]


#: The id of "a library's C++ exception nothing caught" (the others: its crashing code)
THROWN_ID = "OWNER.6"
#: A C++ function in a native backtrace or a kernel's name: ``xgrammar::EarleyParser::Scan(``,
#: ``void flashinfer::sampling::TopPSamplingFromProbKernel<…>``
_NATIVE_FUNCTION = re.compile(r"(?<![\w:])(?P<name>[A-Za-z_]\w*(?:::[A-Za-z_~]\w*)+)\s*[(<]")


def native_library(
    events: list[Event], texts: list[str], *, engine: str | None
) -> Hypothesis | None:
    """The release of the library whose native code failed: the C++ exception nothing caught
    ("terminate called after throwing an instance of 'tvm::ffi::Error'"), else the first
    function of a listed library in the crash's native backtrace or kernel name (backtraces
    list the innermost frame first). A library that throws while the server imports or
    loads is most often a build that does not fit the rest of the install; one that crashes
    inside its own code, a bug another release of it has not."""
    engine_dist = engine_distribution(engine)
    thrown = [(str(e.fields["thrown"]), e.line) for e in events if e.fields.get("thrown")]
    for name, line in thrown:
        dist = package_of_cxx_type(name)
        if dist is not None and not passes_through(dist) and dist != engine_dist:
            return _native_hypothesis(
                THROWN_ID,
                dist,
                f"{dist}'s native code threw {name} and nothing caught it: the installed {dist} "
                "is not a release the rest of the install was built with.",
                f"an uncaught {name} (line {line})",
            )
    for text in texts:
        for m in _NATIVE_FUNCTION.finditer(text):
            dist = package_of_cxx_type(m.group("name"))
            if dist is None or passes_through(dist) or dist == engine_dist:
                continue
            return _native_hypothesis(
                "OWNER.7",
                dist,
                f"The crash is inside {dist}'s native code ({m.group('name')}): a bug of the "
                f"installed {dist} that another release may not have.",
                f"the crash's native frames are {dist}'s",
            )
    return None


def _native_hypothesis(id_: str, dist: str, cause: str, why: str) -> Hypothesis:
    return Hypothesis(
        id=id_,
        cause=cause,
        confidence=RAISER_CONFIDENCE,
        changes=(Change(kind="package", name=dist, value=ANOTHER_RELEASE),),
        why=why,
        references=("https://en.cppreference.com/w/cpp/error/terminate",),
        rule=None,
    )


def engine_release(
    frames: tuple[Frame, ...],
    *,
    error_class: str,
    engine: str | None,
    engine_version: str | None,
    distribution: str | None = None,
    recognised: bool = False,
) -> list[Hypothesis]:
    """The engine's own release, when the failure happened inside the engine's code: the
    release before the installed one (a regression) and, with the version known, the one
    after it (a bug fixed since). Ranked lower when a rule ``recognised`` the message."""
    dist = distribution or engine_distribution(engine)
    if dist is None or error_class not in RELEASE_CLASSES:
        return []
    found = raiser(frames)
    if found is not None and found.distribution != dist:
        return []
    installed = f" {engine_version}" if engine_version else ""
    base = ENGINE_RELEASE_FILL_IN if recognised else ENGINE_RELEASE_CONFIDENCE
    moves = [
        (
            release_before(engine_version) if engine_version else ANOTHER_RELEASE,
            f"A regression of {dist}{installed}: the failure happens inside the engine's own "
            "code, and the release before it may not have it.",
        )
    ]
    if engine_version:
        moves.append(
            (
                release_after(engine_version),
                f"A bug of {dist}{installed} fixed since: the failure happens inside the "
                "engine's own code, and the next release may have fixed it.",
            )
        )
    return [
        Hypothesis(
            id=f"OWNER.{2 + n}",
            cause=cause,
            confidence=round(base - 0.01 * n, 3),
            changes=(Change(kind="package", name=dist, value=value),),
            why=f"no rule explains the failure and its frames are {dist}'s own",
            references=(
                "https://packaging.python.org/en/latest/specifications/version-specifiers/",
            ),
            rule=None,
        )
        for n, (value, cause) in enumerate(moves)
    ]


def culprit_build(error_class: str, culprit: str | None, engine: str | None) -> Hypothesis | None:
    """A build of the kernel library at fault that carries this GPU's architecture."""
    package = package_of_kernel_library(culprit, engine)
    spec = all_engines().get(engine or "")
    if error_class != "arch_unsupported" or package is None or (spec is not None and spec.native):
        return None
    return Hypothesis(
        id="OWNER.4",
        cause=f"The installed {package} has no code for this GPU's architecture.",
        confidence=0.45,
        changes=(Change(kind="package", name=package, value="a build with this GPU's arch"),),
        why=f"the failing kernel belongs to {culprit}",
        references=(
            "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility",
        ),
        rule=None,
    )


def culprit_release(error_class: str, culprit: str | None, engine: str | None) -> Hypothesis | None:
    """Another release of the kernel library the failure was located in: kernel libraries
    (flashinfer, FlashAttention, Triton) change kernels between releases, and a regression or
    a fix of one is the commonest confirmed change for their faults."""
    package = package_of_kernel_library(culprit, engine)
    spec = all_engines().get(engine or "")
    if (
        error_class not in RELEASE_CLASSES
        or error_class == "arch_unsupported"  # a build with the arch, not another release
        or package is None
        or (spec is not None and (spec.native or spec.distribution == package))
    ):
        return None
    return Hypothesis(
        id="OWNER.5",
        cause=f"A regression or bug of the installed {package}: the failing code is its kernels.",
        confidence=CULPRIT_RELEASE_CONFIDENCE,
        changes=(Change(kind="package", name=package, value=ANOTHER_RELEASE),),
        why=f"the failure was located in {culprit}'s code",
        references=("https://packaging.python.org/en/latest/specifications/version-specifiers/",),
        rule=None,
    )
