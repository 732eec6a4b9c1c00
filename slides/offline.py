"""nbconvert settings for slide decks that open with no network (README.md, "Presenting"):

    .venv/bin/jupyter nbconvert --config slides/offline.py --to slides notebooks/en/03_….ipynb

nbconvert's own slides load reveal.js, require.js, jQuery, MathJax and mermaid from public CDNs.
With these settings the template in reveal-offline/ writes reveal.js, its speaker-notes plugin and,
for a notebook with formulas, MathJax into the page (from vendor/, with their licences), so the
.slides.html file works on its own: offline, from a USB stick, as an e-mail attachment.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent

c = get_config()  # noqa: F821 - traitlets defines get_config() for the files it reads

c.SlidesExporter.template_name = "reveal-offline"
c.SlidesExporter.extra_template_basedirs = [str(HERE)]  # finds reveal-offline/
c.SlidesExporter.extra_template_paths = [str(HERE / "vendor")]  # the files it writes in

# A 16:9 slide on which the notebooks' longest code lines fit, and slides taller than the
# screen scroll instead of being cut off at the bottom (a teacher who copies the command as
# written gets a usable deck; override on the command line, e.g. --SlidesExporter.reveal_scroll=False).
c.SlidesExporter.reveal_width = "1280"
c.SlidesExporter.reveal_height = "720"
c.SlidesExporter.reveal_scroll = True
