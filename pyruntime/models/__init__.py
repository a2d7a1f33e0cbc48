"""Models by name: the catalogue of known-good GGUFs, the verified downloader and the cache of pulled models."""

from pyruntime.models.cache import ModelCache, PulledModel, PullRequest, models_dir
from pyruntime.models.catalog import CATALOG, CatalogEntry
from pyruntime.models.download import DownloadError, DownloadProgress

__all__ = ["CATALOG", "CatalogEntry", "DownloadError", "DownloadProgress", "ModelCache", "PullRequest",
           "PulledModel", "models_dir"]
