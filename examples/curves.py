"""The examples' one plotting helper: training curves per epoch as a PNG (matplotlib is optional).

    from curves import save_curves
    save_curves("run_curves.png", epochs, {"loss": {"train": losses}, "accuracy": {"train": tr, "test": te}})

Each panel is one axis with a line per label; a panel whose name contains "loss" uses a log scale when
its values span more than a factor of 10. Without matplotlib (`pip install -e ".[plot]"`), or with `path=""`, it saves
nothing and returns False, so the examples run either way.
"""

import importlib.util


def save_curves(path, epochs, panels, title=None):
    """Save `panels` ({panel name: {line label: values per epoch}}) against `epochs` as a PNG at `path`.
    Returns True when the file was written, False without matplotlib or when `path` is empty."""
    if not path or importlib.util.find_spec("matplotlib") is None:
        return False
    import matplotlib

    matplotlib.use("Agg")  # no display needed: a file only
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(panels), figsize=(3.5 * len(panels), 2.6), dpi=80, squeeze=False)
    for ax, (name, lines) in zip(axes[0], panels.items()):
        for label, values in lines.items():
            ax.plot(list(epochs), [float(v) for v in values], marker=".", label=label)
        ys = [float(v) for values in lines.values() for v in values]
        wide = bool(ys) and min(ys) > 0 and max(ys) > 10 * min(ys)  # a loss falling over decades
        ax.set(xlabel="epoch", ylabel=name, yscale="log" if "loss" in name and wide else "linear")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(lines) > 1:
            ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
