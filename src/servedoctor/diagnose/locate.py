"""Where and when: phase, component, culprit and sync point of the root failure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servedoctor.diagnose.observe import Observations
from servedoctor.diagnose.tables import tables
from servedoctor.engines import all_engines
from servedoctor.logs.model import Event, Frame

#: Phase when nothing in the log says otherwise, by error class. Kernel faults happen
#: where kernels run, serving; backend support is checked while the model is built; memory
#: runs out, and a model's classes or weights fail to fit, first while it is loaded.
CLASS_PHASE: dict[str, str] = {
    "cuda_oom": "load",
    "build_failure": "install",
    "abi_mismatch": "startup",
    "missing_dependency": "startup",
    "driver_mismatch": "startup",
    "port_conflict": "startup",
    "model_unsupported": "load",
    "kv_cache_capacity": "memory_setup",
    "nccl_error": "startup",
    "arch_unsupported": "load",
    "device_assert": "serving",
    "illegal_memory_access": "serving",
    "cublas_error": "serving",
    "numerical": "serving",
    "hang": "serving",
}

#: Errors raised by a kernel while the model runs (not by set-up code).
KERNEL_CLASSES = frozenset(
    {
        "arch_unsupported",
        "illegal_memory_access",
        "device_assert",
        "cublas_error",
        "triton_error",
        "numerical",
    }
)

#: torch numbers each process group's collectives (``SeqNum=N``, ``NCCL work: N``); a
#: timeout of one of the first few happened while the ranks were still being set up.
_SEQNUM = re.compile(r"(?:SeqNum=|NCCL work: )(\d+)")
EARLY_COLLECTIVES = 16

#: Component when nothing more specific is known, by error class.
CLASS_COMPONENT: dict[str, str] = {
    "cuda_oom": "memory",
    "kv_cache_capacity": "memory",
    "nccl_error": "communication",
    "abi_mismatch": "environment",
    "missing_dependency": "environment",
    "driver_mismatch": "environment",
    "build_failure": "environment",
    "arch_unsupported": "environment",
    "port_conflict": "environment",
    "model_unsupported": "model",
    "triton_error": "environment",
}

ASYNC_CLASSES = frozenset({"device_assert", "illegal_memory_access"})

#: A step marker (SGLang "Prefill batch.", "Decode batch.") this close before the error
#: names the batch that failed when the frames only say "serving".
STEP_MARKER_LINES = 3

#: Components that only dispatch work: a kernel's fault is never theirs.
DISPATCH_COMPONENTS = frozenset({"scheduler"})


def _where(frame: Frame) -> str:
    return f"{frame.file}:{frame.func}"


#: A call in a frame's code line: ``out = self.verify(batch)`` calls ``verify``.
_CALL = re.compile(r"([A-Za-z_]\w*)\s*\(")


def with_callees(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The frames plus what the innermost one was calling, as frames of the same file.

    Excerpts pasted into bug reports often end at the innermost frame's code line; the
    function it calls is the next frame the paste cut off, and its name can tell the phase
    (``self.verify(...)`` in a speculative worker is a decode step).
    """
    if not frames or not frames[-1].code:
        return frames
    last = frames[-1]
    calls = [
        Frame(file=last.file, line=None, func=name, at=last.at)
        for name in _CALL.findall(last.code)
        if name not in ("self", "super")
    ]
    return frames + tuple(calls)


def phase_from_frames(frames: tuple[Frame, ...]) -> str | None:
    """Innermost lifecycle frame (start-up last), else innermost serving frame."""
    t = tables()
    frames = with_callees(frames)
    found = [(i, t.phase_of_frame(_where(f))) for i, f in enumerate(frames)]
    lifecycle = [p for _, p in found if p in t.lifecycle]
    specific = [p for p in lifecycle if p != "startup"]
    if specific:
        return specific[-1]
    if lifecycle:
        return lifecycle[0]
    serving = [p for _, p in found if p is not None]
    steps = [p for p in serving if p in ("prefill", "decode")]
    if steps:
        return steps[-1]
    return serving[-1] if serving else None


def frames_near(obs: Observations, root: Event | None) -> tuple[Frame, ...]:
    """The frames that explain the root failure: its own traceback, or the chain around it."""
    if root is None:
        return ()
    if root.frames:
        return root.frames
    tracebacks = [e for e in obs.events if e.kind in ("traceback", "stack") and e.frames]
    if not tracebacks:
        return ()
    # the traceback that holds the root line, else the nearest one before or after it
    nearest = min(
        tracebacks,
        key=lambda e: (
            0
            if e.line <= root.line <= e.last_line
            else min(abs(e.line - root.line), abs(e.last_line - root.line))
        ),
    )
    return nearest.frames


def all_frames(obs: Observations) -> tuple[Frame, ...]:
    frames: list[Frame] = []
    for event in obs.events:
        if event.kind in ("traceback", "stack"):
            frames.extend(event.frames)
    return tuple(frames)


@dataclass(frozen=True, slots=True)
class Location:
    phase: str | None
    phase_source: str
    component: str | None
    culprit: str | None
    sync_frame: Frame | None


def _class_phase(error_class: str, obs: Observations) -> tuple[str, str]:
    """The phase a failure of this class has when the log dates it no other way: the
    engine's own default, a collective's sequence number, else the class's ("class")."""
    spec = all_engines().get(obs.engine or "")
    if spec is not None and error_class in spec.undated:
        return spec.undated[error_class], "engine"
    if error_class == "nccl_error":
        numbers = [int(m.group(1)) for t in obs.texts for m in [_SEQNUM.search(t.text)] if m]
        if numbers:  # the first few collectives run while the ranks are set up
            return ("serving" if min(numbers) > EARLY_COLLECTIVES else "startup"), "count"
    return CLASS_PHASE.get(error_class, "startup"), "class"


def _warmup_refinement(obs: Observations, phase: str, root: Event | None) -> str:
    """Serving markers before the engine says 'ready' belong to its own warm-up request."""
    spec = all_engines().get(obs.engine or "")
    if spec is None or not spec.warmup_before_ready or root is None:
        return phase
    before = [p for p in obs.phases if p.line <= root.line]
    saw_warmup = any(p.fields["phase"] == "warmup" for p in before)
    saw_ready = any(
        p.fields.get("label") == "ready" or any(r.search(p.text) for r in spec.ready_re)
        for p in before
    )
    return "warmup" if saw_warmup and not saw_ready else phase


def locate(
    obs: Observations,
    *,
    error_class: str,
    root: Event | None,
    root_text: str,
    rule_phase: str | None,
    rule_component: str | None,
    rule_culprit: str | None,
    phase_hint: str | None,
    phase_default: str | None = None,
) -> Location:
    frames = frames_near(obs, root)
    message = root_text
    if root is not None and root.fields.get("message"):
        message = f"{root_text}\n{root.fields['message']}"
    if root is not None:
        # detail lines printed right after a one-line error (llama.cpp, C++ stack lines)
        after = [
            t.text
            for t in obs.texts
            if root.line < t.line <= root.last_line + 3
            and t.role == "line"
            and t.event.kind not in ("traceback", "stack")
            and t.event.rank == root.rank
        ]
        message = "\n".join([message, *after])
        if error_class == "build_failure":
            # what a JIT compiler was building when it failed
            jit = [e for e in obs.events if e.kind == "jit" and e.line <= root.line]
            if jit:
                message += "\n" + jit[-1].text
    phase, source = _phase(obs, error_class, root, message, frames, rule_phase, phase_hint)
    if source in ("class", "engine", "count") and phase_default is not None:
        phase, source = phase_default, "rule default"
    if phase == "serving" and phase_hint in ("prefill", "decode"):
        phase = phase_hint
    if phase == "serving" and source in ("frames", "text"):
        phase = _step_marker(obs, root) or phase
    if phase in ("prefill", "decode", "serving") and source in ("marker", "frames", "text"):
        phase = _warmup_refinement(obs, phase, root)

    sync = _sync_frame(frames, error_class, obs)
    component, culprit = _component(
        frames,
        message,
        skip_frames=sync is not None,
        skip=DISPATCH_COMPONENTS if error_class in KERNEL_CLASSES else frozenset(),
    )
    component = rule_component or component or CLASS_COMPONENT.get(error_class, "unknown")
    culprit = rule_culprit or culprit
    return Location(
        phase=phase, phase_source=source, component=component, culprit=culprit, sync_frame=sync
    )


def _step_marker(obs: Observations, root: Event | None) -> str | None:
    """Prefill or decode, when the engine announced that step right before the error."""
    if root is None:
        return None
    marker = obs.last_phase_before(root.line)
    if marker is None or root.line - marker.line > STEP_MARKER_LINES:
        return None
    phase = str(marker.fields["phase"])
    return phase if phase in ("prefill", "decode") else None


def _first_forward(obs: Observations, error_class: str) -> str | None:
    """The engine's first-forward phase, when the error is a kernel's own fault."""
    spec = all_engines().get(obs.engine or "")
    if spec is None or error_class not in KERNEL_CLASSES:
        return None
    return spec.first_forward


def _phase(
    obs: Observations,
    error_class: str,
    root: Event | None,
    message: str,
    frames: tuple[Frame, ...],
    rule_phase: str | None,
    phase_hint: str | None,
) -> tuple[str, str]:
    """Rule label, then frames, then words in the error, then markers, hint, class default."""
    if rule_phase is not None:
        return rule_phase, "rule"
    t = tables()
    first_forward = _first_forward(obs, error_class)
    for candidate in (frames, all_frames(obs)):
        phase = phase_from_frames(candidate)
        in_init = any(t.engine_init.search(_where(f)) for f in candidate)
        # a kernel fault under the engine's constructor happened in its first forward pass
        if first_forward and in_init and phase in (None, "startup"):
            return first_forward, "frames"
        if phase is not None:
            return phase, "frames"
    phase = t.phase_of_text(message) or t.phase_of_text(
        "\n".join(f.func for f in frames if f.file == "<native>")
    )
    if phase is not None:
        return phase, "text"
    if root is not None:
        marker = obs.last_phase_before(root.line)
        if (
            marker is not None
            and marker.line == root.line
            and marker.fields["phase"] in t.lifecycle
        ):
            # a request's step can prefix its error line (TGI's "prefill{id=1}" span); a
            # start-up announcement's words inside an error message say nothing of when
            marker = obs.last_phase_before(root.line, strictly=True)
        if marker is not None:
            return marker.fields["phase"], "marker"
    if phase_hint:
        return phase_hint, "supervisor"
    return _class_phase(error_class, obs)


def _component(
    frames: tuple[Frame, ...],
    message: str,
    *,
    skip_frames: bool,
    skip: frozenset[str] = frozenset(),
) -> tuple[str | None, str | None]:
    """The error text first (kernel and library names), then frames innermost-first.

    A frame that only synchronises shows where an asynchronous error surfaced, not where
    it happened, so such frames are skipped.
    """
    t = tables()
    component: str | None = None
    culprit: str | None = None
    candidates = [message]
    if not skip_frames:
        candidates += [_where(f) + " " + f.code for f in reversed(frames)]
    for text in candidates:
        for row in t.components_of(text):
            if row.component in skip:
                continue
            component = component or row.component
            culprit = culprit or row.culprit
        if component and culprit:
            break
    return component, culprit


def _sync_frame(frames: tuple[Frame, ...], error_class: str, obs: Observations) -> Frame | None:
    """The innermost frame, when it only waits for the GPU and the error is asynchronous."""
    asynchronous = error_class in ASYNC_CLASSES or any(
        "asynchronously reported" in t.text for t in obs.texts[-400:]
    )
    if not asynchronous or not frames:
        return None
    sync = tables().sync_points

    def waits(frame: Frame) -> bool:
        return bool(sync.search(frame.code) or sync.search(frame.func + "("))

    inner = frames[-1]
    if not waits(inner):
        return None
    # name the caller that asked to wait, not torch's own wrapper around the wait
    for frame in reversed(frames[:-1]):
        if not _in_torch(inner):
            break
        if not waits(frame):
            break
        inner = frame
    return inner


def _in_torch(frame: Frame) -> bool:
    return "/torch/" in frame.file.replace("\\", "/")
