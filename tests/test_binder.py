"""Static checks of the Binder configuration in binder/ and of the READMEs' launch badges (no
network, no install).

Binder builds the image with repo2docker, which reads its config files only from binder/ when
that folder exists. These tests keep binder/ the one config folder, free of files that would
change which build pack repo2docker picks, on the Python of the README and pyproject.toml, and
pinned exactly like the root requirements.txt (torch as the CPU build). tools/check_binder_env.py
builds the environment for real.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import load_tool
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
BINDER = REPO / "binder"
ROOT_REQUIREMENTS = REPO / "requirements.txt"
BINDER_REQUIREMENTS = BINDER / "requirements.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# Files that repo2docker would act on instead of (or besides) binder/requirements.txt, by the
# order of its build packs: each one either takes over the build or adds another runtime.
CONFLICTING = {
    "Dockerfile": "a plain Docker build; every other config file is ignored",
    "default.nix": "the nix build pack; requirements.txt is ignored",
    "Project.toml": "the Julia build pack",
    "JuliaProject.toml": "the Julia build pack",
    "REQUIRE": "the legacy Julia build pack",
    "install.R": "the R build pack",
    "DESCRIPTION": "the R build pack",
    "environment.yml": "the conda build pack; requirements.txt and runtime.txt are ignored",
    "environment.yaml": "the conda build pack; requirements.txt and runtime.txt are ignored",
    "Pipfile": "the pipenv build pack; requirements.txt is ignored",
    "Pipfile.lock": "the pipenv build pack; requirements.txt is ignored",
    "requirements3.txt": "a second environment (only meant for Python 2 kernels)",
    "setup.py": "ignored inside binder/, so it would only mislead",
    "pyproject.toml": "ignored inside binder/, so it would only mislead",
}
# What this project keeps in binder/. Adding e.g. apt.txt or postBuild is fine: add it here.
EXPECTED = {"requirements.txt", "runtime.txt"}


# --- parsing requirement files --------------------------------------------------------------


@dataclass
class Requirements:
    """A requirements file: exact pins by canonical name, and its option lines."""

    pins: dict[str, Requirement] = field(default_factory=dict)
    options: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_requirements(
    text: str, source: str, platform: dict[str, str] | None = None
) -> Requirements:
    """Split a requirements file into `name==version` pins and option lines (`-e .`, indexes).

    With ``platform`` (marker variables such as sys_platform), a line with an environment
    marker counts only where its marker holds there, as pip would read it on that platform;
    without, a marker is a problem. Anything else (a range, a duplicate, a line packaging
    cannot parse) is listed in `problems`, so that a test can name it instead of silently
    skipping it.
    """
    parsed = Requirements()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        if line.startswith("-"):
            parsed.options.append(" ".join(line.split()))
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            parsed.problems.append(f"{source}:{number}: cannot parse {line!r}: {exc}")
            continue
        if platform is not None and requirement.marker is not None:
            if not requirement.marker.evaluate(platform):
                continue  # pip skips this line on that platform
            requirement.marker = None
        if requirement.marker is not None or requirement.extras or requirement.url:
            # `x==1; sys_platform == "win32"` would not be installed on Binder's Linux, and
            # extras or a URL install something else than the pin says.
            parsed.problems.append(
                f"{source}:{number}: {line!r} has an environment marker, extras or a URL; "
                f"write a plain `name==version` pin"
            )
            continue
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            parsed.problems.append(f"{source}:{number}: {line!r} is not an exact `==` pin")
            continue
        name = canonicalize_name(requirement.name)
        if name in parsed.pins:
            parsed.problems.append(f"{source}:{number}: {requirement.name} is pinned twice")
            continue
        parsed.pins[name] = requirement
    return parsed


def pinned_version(requirement: Requirement) -> str:
    return next(iter(requirement.specifier)).version


def pin_mismatch(
    name: str,
    root_version: str,
    binder_version: str | None,
    root_label: str = "requirements.txt",
    binder_label: str = "binder/requirements.txt",
) -> str | None:
    """None if the Binder pin equals the root pin, ignoring a local label such as `+cpu`;
    otherwise a sentence that names both pins."""
    root_pin = f"{name}=={root_version}"
    if binder_version is None:
        return f"{binder_label} does not pin {name}, but {root_label} pins {root_pin}"
    try:
        same = Version(Version(binder_version).public) == Version(Version(root_version).public)
    except InvalidVersion as exc:
        return f"{binder_label} pins {name}=={binder_version}: {exc}"
    if same:
        return None
    return f"{binder_label} pins {name}=={binder_version} but {root_label} pins {root_pin}"


def read(path: Path) -> str:
    assert path.is_file(), f"{path.relative_to(REPO)} is missing"
    return path.read_text(encoding="utf-8")


# The root file as pip reads it on Binder's Linux x86-64 (its torch line has platform markers).
BINDER_PLATFORM = {
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
}
ROOT = parse_requirements(
    ROOT_REQUIREMENTS.read_text(encoding="utf-8"), "requirements.txt", BINDER_PLATFORM
)


@pytest.fixture(scope="module")
def binder() -> Requirements:
    return parse_requirements(read(BINDER_REQUIREMENTS), "binder/requirements.txt")


# --- the comparison itself -------------------------------------------------------------------


def test_pin_mismatch_names_both_pins():
    message = pin_mismatch("numpy", "2.4.6", "2.4.5")
    assert message == (
        "binder/requirements.txt pins numpy==2.4.5 but requirements.txt pins numpy==2.4.6"
    )


def test_pin_mismatch_names_a_missing_pin():
    message = pin_mismatch("playwright", "1.2.3", None)
    assert message is not None
    assert "does not pin playwright" in message and "playwright==1.2.3" in message


def test_pin_mismatch_ignores_only_the_local_label():
    assert pin_mismatch("torch", "2.13.0", "2.13.0+cpu") is None
    assert pin_mismatch("torch", "2.13.0", "2.13.0") is None
    assert pin_mismatch("numpy", "2.4", "2.4.0") is None  # PEP 440: the same version
    assert pin_mismatch("torch", "2.13.0", "2.13.1+cpu") is not None


@pytest.mark.parametrize(
    "line",
    ['matplotlib==3.11.2; sys_platform == "win32"', "ipywidgets[test]==8.1.9"],
)
def test_parse_requirements_refuses_markers_and_extras(line):
    parsed = parse_requirements(line + "\n", "binder/requirements.txt")
    assert not parsed.pins
    expected = (
        f"binder/requirements.txt:1: {line!r} has an environment marker, extras or a URL; "
        f"write a plain `name==version` pin"
    )
    assert parsed.problems == [expected]


def test_parse_requirements_on_a_bad_file():
    text = "--extra-index-url https://example.invalid\nnumpy==2.4.5  # note\nrich>=13\n-e .\n"
    parsed = parse_requirements(text, "bad.txt")
    assert list(parsed.pins) == ["numpy"]
    assert parsed.options == ["--extra-index-url https://example.invalid", "-e ."]
    assert parsed.problems == ["bad.txt:3: 'rich>=13' is not an exact `==` pin"]
    message = pin_mismatch("numpy", "2.4.6", pinned_version(parsed.pins["numpy"]))
    assert message == (
        "binder/requirements.txt pins numpy==2.4.5 but requirements.txt pins numpy==2.4.6"
    )


# --- one config folder, nothing that takes over the build -----------------------------------


def test_binder_is_the_only_config_folder():
    assert BINDER.is_dir(), "binder/ is missing"
    assert not (REPO / ".binder").exists(), (
        "both binder/ and .binder/ exist; repo2docker refuses to build such a repository"
    )


def test_binder_holds_no_conflicting_config():
    found = sorted(name for name in CONFLICTING if (BINDER / name).exists())
    assert not found, "; ".join(
        f"binder/{name} would trigger {CONFLICTING[name]}" for name in found
    )


def test_binder_holds_only_the_expected_files():
    present = {path.name for path in BINDER.iterdir()}
    assert present >= EXPECTED, f"binder/ lacks {sorted(EXPECTED - present)}"
    extra = sorted(present - EXPECTED)
    assert not extra, (
        f"binder/ also holds {extra}; repo2docker acts on several file names there: check "
        "what each does and add it to EXPECTED in tests/test_binder.py if it is intended"
    )


# --- Python version ---------------------------------------------------------------------------


def runtime_python() -> str:
    return load_tool("check_binder_env").runtime_version()  # the tool's own reading


def test_runtime_is_python_3_11():
    assert runtime_python() == "3.11"


def test_runtime_satisfies_requires_python():
    with (REPO / "pyproject.toml").open("rb") as f:
        requires = tomllib.load(f)["project"]["requires-python"]
    runtime = runtime_python()
    assert Version(runtime) in SpecifierSet(requires), (
        f"binder/runtime.txt asks for Python {runtime}, outside requires-python {requires!r}"
    )


def test_runtime_matches_the_readme():
    readme = read(REPO / "README.md")
    stated = re.findall(r"Requires \*\*Python (\d+\.\d+)\*\*", readme)
    assert len(stated) == 1, "README.md should state 'Requires **Python X.Y**' once"
    assert runtime_python() == stated[0], (
        f"binder/runtime.txt says python-{runtime_python()}, README.md says Python {stated[0]}"
    )


# --- pins -------------------------------------------------------------------------------------


def test_both_files_hold_only_exact_pins(binder):
    problems = ROOT.problems + binder.problems
    assert not problems, "\n".join(problems)


def test_root_pins_torch():
    assert "torch" in ROOT.pins, "requirements.txt does not pin torch"


TORCH_FIRST = parse_requirements(
    (REPO / "requirements-torch.txt").read_text(encoding="utf-8"),
    "requirements-torch.txt",
    BINDER_PLATFORM,
)


def test_torch_alone_comes_first_with_the_same_pin():
    """requirements-torch.txt (installed first, --no-deps) pins torch alone, as requirements.txt
    does, so the second install finds it installed."""
    assert not TORCH_FIRST.problems, "\n".join(TORCH_FIRST.problems)
    assert list(TORCH_FIRST.pins) == ["torch"], list(TORCH_FIRST.pins)
    assert str(TORCH_FIRST.pins["torch"]) == str(ROOT.pins["torch"]), (
        f"requirements-torch.txt pins {TORCH_FIRST.pins['torch']}, requirements.txt "
        f"{ROOT.pins['torch']}"
    )
    # The CPU build; 2.13.0 (CUDA) after README.md's fallback where PyTorch's site is unreachable
    assert str(ROOT.pins["torch"]) in {"torch==2.13.0+cpu", "torch==2.13.0"}


def test_only_the_torch_install_names_a_remote_page():
    """A --find-links or index URL in requirements.txt would be read, and retried where it
    cannot be reached, once per package (minutes): only requirements-torch.txt, with torch alone,
    may name PyTorch's page; the local `-e .` is the only option requirements.txt has."""
    assert ROOT.options == ["-e ."], ROOT.options
    page = "--find-links https://download.pytorch.org/whl/cpu/torch/"
    assert TORCH_FIRST.options in ([page], []), TORCH_FIRST.options  # [] after the fallback


def test_every_root_pin_is_in_binder(binder):
    messages = []
    for name in sorted(ROOT.pins):
        root_version = pinned_version(ROOT.pins[name])
        binder_version = pinned_version(binder.pins[name]) if name in binder.pins else None
        messages.append(pin_mismatch(ROOT.pins[name].name, root_version, binder_version))
    assert not [m for m in messages if m is not None], "\n".join(filter(None, messages))


def test_binder_pins_nothing_the_root_does_not(binder):
    extra = sorted(binder.pins.keys() - ROOT.pins.keys())
    assert not extra, (
        f"binder/requirements.txt pins {extra}, which requirements.txt does not: "
        "Binder would run with packages a local install lacks"
    )


def test_binder_torch_is_the_cpu_build(binder):
    assert "torch" in binder.pins, "binder/requirements.txt does not pin torch"
    version = Version(pinned_version(binder.pins["torch"]))
    assert version.local == "cpu", (
        f"binder/requirements.txt pins torch=={version}; pin the CPU build, "
        f"torch=={version.public}+cpu, or Binder's Linux build may pull the CUDA wheel"
    )


def option_values(options: list[str], *flags: str) -> list[str]:
    """The values given to any of `flags` (`--flag value` or `--flag=value`)."""
    values = []
    for option in options:
        flag, _, value = option.replace("=", " ", 1).partition(" ")
        if flag in flags:
            values.append(value.strip())
    return values


def test_binder_uses_the_cpu_index_besides_pypi(binder):
    extra = [url.rstrip("/") for url in option_values(binder.options, "--extra-index-url")]
    assert CPU_INDEX in extra, (
        f"binder/requirements.txt lacks `--extra-index-url {CPU_INDEX}` (extra indexes: {extra})"
    )
    replaced = option_values(binder.options, "--index-url", "-i")
    assert not replaced, f"binder/requirements.txt replaces PyPI with {replaced}"


def test_binder_installs_attn_lib_editable(binder):
    editable = {"-e .", "--editable .", "--editable=."}
    assert editable & set(binder.options), (
        "binder/requirements.txt lacks `-e .`: with binder/ present, repo2docker does not "
        "install pyproject.toml by itself, and the notebooks could not import attn_lib"
    )


# --- the READMEs' launch badges ----------------------------------------------------------------

BADGE = re.compile(
    r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]"
    r"\((https://mybinder\.org/v2/gh/[^/\s)]+/[^/\s)]+/[^?\s)]+)\?urlpath=lab/tree/([^)\s]+)\)"
)
EDITIONS = {
    "README.md": ["notebooks/en/00_start_here.ipynb", "notebooks/zh/00_start_here.ipynb"],
    "README.zh-CN.md": ["notebooks/zh/00_start_here.ipynb"],
}


@pytest.mark.parametrize("readme", sorted(EDITIONS))
def test_readme_badges_open_jupyterlab_at_existing_notebooks(readme):
    badges = BADGE.findall(read(REPO / readme))
    opened = [notebook for _, notebook in badges]
    assert opened == EDITIONS[readme], (
        f"{readme} should have Binder badges opening {EDITIONS[readme]} (in that order), each "
        "linking to https://mybinder.org/v2/gh/<owner>/<repo>/<ref>?urlpath=lab/tree/<notebook>;"
        f" it has {opened}"
    )
    for notebook in opened:
        assert (REPO / notebook).is_file(), f"a badge in {readme} opens {notebook}: no such file"


def test_every_badge_launches_the_same_repository():
    launched = {base for readme in EDITIONS for base, _ in BADGE.findall(read(REPO / readme))}
    assert len(launched) == 1, f"the badges launch different repositories or refs: {launched}"


def fenced_bash(text: str) -> list[str]:
    """The contents of the ```bash blocks of a markdown text, in order."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [block.strip() for block in blocks]


def test_readme_zh_opens_with_the_quick_start_commands():
    """README.zh-CN.md's first two commands are README.md's install and open commands, the
    second opening the Chinese edition; README.md links to it at the top."""
    english, chinese = read(REPO / "README.md"), read(REPO / "README.zh-CN.md")
    install, open_lab = fenced_bash(english)[:2]
    assert open_lab.endswith("jupyter lab notebooks/en"), f"README.md's second command: {open_lab}"
    expected = [install, open_lab.replace("notebooks/en", "notebooks/zh")]
    assert fenced_bash(chinese)[:2] == expected
    assert "(README.zh-CN.md)" in "\n".join(english.splitlines()[:6])


def test_parse_requirements_reads_markers_for_a_platform():
    text = 'torch==2.13.0+cpu ; sys_platform == "linux"\ntorch==2.13.0 ; sys_platform != "linux"\n'
    parsed = parse_requirements(text, "requirements.txt", BINDER_PLATFORM)
    assert not parsed.problems and pinned_version(parsed.pins["torch"]) == "2.13.0+cpu"
    mac = parse_requirements(text, "requirements.txt", {"sys_platform": "darwin"})
    assert pinned_version(mac.pins["torch"]) == "2.13.0"
