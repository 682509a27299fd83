"""One self-contained HTML page: text, tables and PNG plots embedded as data URIs, so the file can be mailed,
attached or opened offline. It knows nothing of what it shows: callers build the :class:`Page`.

A small inline script records, once the page has loaded, how many images decoded and how many tables it holds
(``data-images-decoded`` and ``data-tables`` on ``<body>``): a headless browser's DOM dump then says whether the
page really shows its content.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Table:
    caption: str
    head: Sequence[str]
    rows: Sequence[Sequence[object]]


@dataclass(frozen=True)
class Image:
    caption: str
    png: Path


@dataclass(frozen=True)
class Preformatted:
    """Text shown as written (a config file)."""

    caption: str
    text: str


@dataclass(frozen=True)
class Section:
    heading: str
    paragraphs: Sequence[str] = ()  # plain text, escaped on rendering
    blocks: Sequence[Table | Image | Preformatted] = field(default_factory=tuple)


@dataclass(frozen=True)
class Page:
    title: str
    sections: Sequence[Section]


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; } th { background: #f2f2f2; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
pre { background: #f6f6f6; padding: 0.6em; border: 1px solid #ddd; }
"""

CHECK = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  document.body.dataset.imagesDecoded = images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.dataset.tables = document.querySelectorAll("table").length;
});
"""


def render(page: Page) -> str:
    """The page as one HTML document.

    >>> text = render(Page("T", [Section("S", ["a < b"], [Table("c", ["x"], [[1]])])]))
    >>> "<td>1</td>" in text and "a &lt; b" in text and text.startswith("<!DOCTYPE html>")
    True
    """
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(page.title)}</title><style>{STYLE}</style>",
             f"<script>{CHECK}</script></head><body>", f"<h1>{html.escape(page.title)}</h1>"]
    for section in page.sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        parts += [f"<p>{html.escape(p)}</p>" for p in section.paragraphs]
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(_table(block))
            elif isinstance(block, Image):
                parts.append(_image(block))
            else:
                parts.append(f"<figure><pre>{html.escape(block.text)}</pre>"
                             f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in table.head)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in table.rows)
    return f"<table><caption>{html.escape(table.caption)}</caption><tr>{head}</tr>{rows}</table>"


def _image(image: Image) -> str:
    data = base64.b64encode(Path(image.png).read_bytes()).decode("ascii")
    return (f"<figure><img alt=\"{html.escape(image.caption)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{html.escape(image.caption)}</figcaption></figure>")
