"""Models by name: the catalogue of known-good GGUFs, the verified downloader and the cache of pulled models."""

from pyruntime.catalog.cache import ModelCache, PulledModel, PullRequest, models_dir
from pyruntime.catalog.download import DownloadError, DownloadProgress
from pyruntime.catalog.entries import CATALOG, CatalogEntry

__all__ = ["CATALOG", "CatalogEntry", "DownloadError", "DownloadProgress", "ModelCache", "PullRequest",
           "PulledModel", "models_dir"]
