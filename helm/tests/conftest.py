"""Shared options for the chart checks."""


def pytest_addoption(parser):
    parser.addoption(
        "--update",
        action="store_true",
        default=False,
        help="rewrite helm/tests/rendered-*-config.toml from the chart",
    )
