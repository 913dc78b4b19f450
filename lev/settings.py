"""Service settings, read from the environment with the `LEV_` prefix (pydantic-settings)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every operator-facing knob. Names are part of the operator interface (DESIGN.md §3)."""

    model_config = SettingsConfigDict(env_prefix="LEV_", extra="ignore")

    database_url: str | None = None
    redis_url: str | None = None
    data_dir: Path = Path("./.lev")
    # the public URL (behind a proxy); unset: the address each request was actually served on
    base_url: str | None = None
    allow_private_urls: bool = False
    # CIDR networks URL ingest may reach even with allow_private_urls off (e.g. an intranet wiki)
    private_url_allowlist: list[str] = Field(default_factory=list)

    transcribe_url: str | None = None
    transcribe_api_key: str | None = None
    transcribe_model: str = "whisper-1"
    transcribe_timeout_sec: float = 300.0
    llm_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str = "gpt-4o-mini"

    workers_inline: bool = True
    # operations (docs/operations.md)
    log_level: str = "info"
    log_format: str = "json"  # "json" (one object per line) or "console"
    metrics_dir: Path | None = None  # shared by the processes of one machine; default <data_dir>/metrics
    shutdown_grace_sec: float = 30.0  # SIGTERM: how long in-flight requests and the current job may finish
    job_max_tries: int = 3  # a job whose worker dies (or that times out) this often marks its item failed
    embedder: str = "local"
    embed_url: str | None = None
    embed_api_key: str | None = None
    embed_model: str = "text-embedding-3-small"
    embed_dim: int = 384

    rate_limits: str = "on"
    limit_read: str = "1000/hour"
    limit_ingest: str = "60/hour"
    limit_delete: str = "60/hour"
    limit_bulk: str = "30/hour"
    limit_mcp_write: str = "60/hour"
    default_write_cap: int = 200

    tier_free_tokens: int = 0
    tier_pro_tokens: int = -1
    tier_free_minutes: int = 0
    tier_pro_minutes: int = 600

    activity_retention_days: int = 90
    trusted_proxies: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = 2 * 1024 * 1024
    token_default_days: int = 365

    # uploads / object storage (store/objects.py)
    upload_secret: str | None = None  # HMAC key for local signed upload URLs; default <data_dir>/signing.key
    object_store: str = "local"  # "local" (files under <data_dir>/objects) or "s3"
    s3_bucket: str | None = None
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_access_key: str | None = None
    s3_secret_key: str | None = None

    # search tuning (tuned on SciFact train, reported on test: bench/LAB_NOTES.md, bench/RESULTS.md)
    search_candidates: int = 100
    search_semantic_weight: float = 0.6
    search_bm25_k1: float = 1.2
    search_bm25_b: float = 0.6
    search_bm25_prune_df: float = 0.03
    hnsw_ef_search: int = 40
    search_exact_scan_max_chunks: int = 5000

    @property
    def limits_on(self) -> bool:
        return self.rate_limits.lower() not in {"off", "false", "0", "no"}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (tests clear the cache after changing the environment)."""
    return Settings()
