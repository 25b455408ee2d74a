"""The cells of benchmarks/REPORT.md's rows (see report_rows.py): formatted
values, measures, the Row type, the peers' figures, and the defensive
readers of results files every row group uses (a missing figure becomes
"not run", never a number). report_rows re-exports every name here."""
import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

NOT_RUN = "not run"


# ------------------------------------------------------------------ values
def fmt_value(v, unit: str) -> str:
    """A figure with its unit scaled for reading: s -> h/min/s/ms/µs/ns,
    1/s -> /s with k/M, B -> B/KB/MB, x -> 23x."""
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return "–"
    if unit == "s":
        for scale, name in ((3600, "h"), (60, "min"), (1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(v) >= scale or (scale == 1e-6 and v):
                return f"{v / scale:.3g} {name}"
        return f"{v * 1e9:.3g} ns"
    if unit == "1/s":
        for scale, name in ((1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s")):
            if v >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.3g} /s"
    if unit == "B":
        for scale, name in ((2**20, "MB"), (2**10, "KB")):
            if v >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.3g} B"
    if unit == "x":
        return f"{v:.3g}x"
    return f"{v:.3g} {unit}"


@dataclass
class Measure:
    """A figure of ours or of plaintext TF: median with min and max (of the
    figure itself: for a rate, min comes from the slowest call)."""
    median: float
    lo: Optional[float] = None
    hi: Optional[float] = None
    note: str = ""

    def text(self, unit: str) -> str:
        s = fmt_value(self.median, unit)
        if self.lo is not None and self.hi is not None and self.lo != self.hi:
            s += f" ({fmt_value(self.lo, unit)}-{fmt_value(self.hi, unit)})"
        return s + (f", {self.note}" if self.note else "")


def stats_measure(st: Optional[dict], per: float = 1.0, rate_n: Optional[float] = None,
                  note: str = "") -> Optional[Measure]:
    """A Measure from a {min_s, median_s, max_s} dict: time per `per` units,
    or with rate_n a rate (rate_n per call)."""
    if not isinstance(st, dict) or st.get("median_s") is None:
        return None
    med, lo, hi = st["median_s"], st.get("min_s"), st.get("max_s")
    if rate_n:
        return Measure(rate_n / med, rate_n / hi if hi else None, rate_n / lo if lo else None,
                       note)
    return Measure(med / per, lo / per if lo is not None else None,
                   hi / per if hi is not None else None, note)


@dataclass
class Row:
    workload: str
    unit: str                                  # of every figure of the row
    anchors: Sequence[str] = ()                # keys of anchors.json; the first is the basis
    ours: Optional[Measure] = None
    status: str = NOT_RUN                      # what to print when ours is None
    plaintext: Optional[Measure] = None
    peer: str = "–"
    comparable: bool = True                    # same workload size as the anchor's
    differs: str = "other size"                # how it is not comparable, when it is not
    anchor_table: Dict[str, dict] = field(default_factory=dict, repr=False)

    def anchor_text(self) -> Tuple[str, str]:
        if not self.anchors:
            return "no published figure", "–"
        figs, srcs = [], []
        for k in self.anchors:
            a = self.anchor_table.get(k)
            if a is None:
                figs.append(f"({k}: not in anchors.json)")
                continue
            v = fmt_value(a["value"], a["unit"])
            if "low" in a and a["low"] != a["high"]:
                v = f"{fmt_value(a['low'], a['unit'])}-{fmt_value(a['high'], a['unit'])}"
            figs.append(f"{re.split(r' [(]|[:,]', a['system'])[0]} {v}")
            # ANCHORS.md, or the seed document a figure was copied from
            where = a["source"].get("file", "ANCHORS.md").rsplit("/", 1)[-1]
            srcs.append(f"{a['system']}; {where}:{','.join(map(str, a['source']['lines']))}")
        return "; ".join(figs), " / ".join(dict.fromkeys(srcs))

    def ratio(self) -> str:
        if self.ours is None or not self.anchors or self.anchors[0] not in self.anchor_table:
            return "–"
        if not self.comparable:
            return f"{self.differs}: no ratio"
        a = self.anchor_table[self.anchors[0]]
        v, ref = self.ours.median, a["value"]
        if not v or not ref:
            return "–"
        if self.unit == "x":   # a ratio published as a range
            lo, hi = a.get("low", ref), a.get("high", ref)
            return ("within the published range" if lo <= v <= hi else
                    "above the published range" if v > hi else "below the published range")
        better = v / ref if self.unit == "1/s" else ref / v
        word = {"B": ("fewer bytes", "more bytes")}.get(self.unit, ("faster", "slower"))
        x = better if better >= 1 else 1 / better
        num = f"{x:.2f}" if x < 10 else f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
        return f"{num}x {word[0] if better >= 1 else word[1]}"

    def cells(self) -> List[str]:
        fig, src = self.anchor_text()
        ours = self.ours.text(self.unit) if self.ours else self.status
        plain = self.plaintext.text(self.unit) if self.plaintext else "–"
        return [self.workload, fig, src, ours, plain, self.peer, self.ratio()]


# ------------------------------------------------------------------ peers
#: peer workload names as the peer driver may spell them -> ours
PEER_ALIASES = {
    "mul": ("mul", "multiplication", "multiply", "elementwisemul"),
    "matmul": ("matmul", "matrixmultiplication"),
    "compare": ("compare", "comparison", "less", "lt"),
    "relu": ("relu",), "sigmoid": ("sigmoid",), "reciprocal": ("reciprocal",),
    "exp": ("exp",), "sort": ("sort",), "max": ("max", "max4", "reducemax"),
    "lr_step": ("lrstep", "lr", "logisticregressionstep", "lrtrainingstep"),
    "lenet5": ("lenet5", "lenet5inference"), "graph_build": ("graphbuild",),
}


def _norm(s) -> str:
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def peer_data(res: dict) -> Optional[dict]:
    """{"rows": [...], "failed": {peer: reason}, "ours": [...]} from
    results/peers.json, whichever of a few layouts the peer driver wrote (ours:
    the tf_privpy rows peers_run.py times beside the peers); None if absent."""
    raw = res.get("peers")
    if raw is None:
        return None
    if "_unreadable" in raw:
        return {"rows": [], "failed": {"peers.json": raw["_unreadable"]}}
    rows = raw.get("rows", []) if isinstance(raw, dict) else list(raw)
    failed = {}
    # benchmarks/peers_run.py: "failed" per peer ({peer, status, reason}), "errors" per
    # workload a peer lacks ({peer, protocol, workload, n, reason})
    for key in ("failed", "errors", "unavailable", "skipped"):
        v = raw.get(key) if isinstance(raw, dict) else None
        if isinstance(v, dict):
            failed.update({str(k): str(w) for k, w in v.items()})
        elif isinstance(v, list):
            for p in v:
                if not isinstance(p, dict):
                    continue
                who = " ".join(str(p[k]) for k in ("peer", "protocol", "workload")
                               if p.get(k)) + (f" n={p['n']}" if p.get("n") else "")
                why = str(p.get("reason") or p.get("note", ""))
                failed[who or "?"] = f"{p['status']}: {why}" if p.get("status") else why
    good, ours = [], []
    for r in rows:
        if not isinstance(r, dict):
            continue
        # peers_run.py times tf_privpy beside the peers: ours, not a peer
        if r.get("peer") == "tf_privpy":
            ours.append(r)
            continue
        if r.get("median_s") is None and r.get("best_s") is None:
            failed.setdefault(str(r.get("peer", "?")), str(r.get("reason") or r.get("note", "")))
        else:
            good.append(r)
    return {"rows": good, "failed": failed, "ours": ours}


def peer_rows(res: dict, workload: str, n=None) -> List[dict]:
    peers = peer_data(res) or {"rows": []}
    names = PEER_ALIASES.get(workload, (workload,))
    return [r for r in peers["rows"] if _norm(r.get("workload")) in names
            and (n is None or r.get("n") == n)]


def peer_cell(res: dict, workload: str, n=None, per: float = 1.0, unit: str = "s",
              rate_n: Optional[float] = None) -> str:
    """Peers' medians for this workload and size, in the row's unit."""
    if res.get("peers") is None:
        return "no peers.json (peers_run.py was not part of this run)"
    rows = peer_rows(res, workload, n)
    if not rows:
        return "no peer row at this size"
    out = []
    for r in rows:
        med = r.get("median_s", r.get("best_s"))
        v = (rate_n / med) if rate_n else med / per
        who = f"{r.get('peer')}" + (f" ({r['protocol']})" if r.get("protocol") else "")
        # a fast wrong answer is not a result: say so where the time is shown
        bad = (r.get("max_rel_error") or 0) > 0.1 and (r.get("max_abs_error") or 0) > 0.1
        out.append(f"{who} {fmt_value(v, unit)}" +
                   (f" (inaccurate: max abs error {r['max_abs_error']:.2g}, relative "
                    f"{r['max_rel_error']:.2g})" if bad else ""))
    return "; ".join(out)


# ------------------------------------------------------------------ groups
def _pick(rows, **want) -> Optional[dict]:
    for r in rows or ():
        if isinstance(r, dict) and all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def _rings(rows, default=(128, 64)) -> List[int]:
    found = sorted({r.get("ring") for r in rows or () if isinstance(r, dict) and r.get("ring")},
                   reverse=True)
    return found or list(default)


def _missing(res, name, what="") -> str:
    if name not in res:
        return NOT_RUN
    if "_unreadable" in res[name]:
        return "not run (results unreadable)"
    return NOT_RUN + (f": {what}" if what else "")
