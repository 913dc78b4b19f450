"""Service settings, read from the environment with the `LEV_` prefix (pydantic-settings)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every operator-facing knob. Names are part of the operator interface (DESIGN.md §3)."""

    model_config = SettingsConfigDict(env_prefix="LEV_", extra="ignore", use_attribute_docstrings=True)

    database_url: str | None = None
    """PostgreSQL (>= 14, with pgvector >= 0.5) URL; unset: the embedded PostgreSQL under the data directory."""
    redis_url: str | None = None
    """Redis (>= 6) URL; unset: the embedded Redis under the data directory."""
    db_pool_size: int = 20
    """Database connections each process keeps open (up to 10 more are opened for bursts and closed after)."""
    db_generic_plans: bool = True
    """Prepared statements are planned once per connection (plan_cache_mode force_generic_plan); false: each time."""
    data_dir: Path = Path("./.lev")
    """Where the embedded servers, uploads and the signing key live."""
    # the public URL (behind a proxy); unset: the address each request was actually served on
    base_url: str | None = None
    """Public URL behind a proxy (signed upload URLs, MCP Origin check); unset: the address served."""
    allow_private_urls: bool = False
    """Let URL ingest fetch private, loopback and link-local addresses (off: SSRF guard)."""
    # CIDR networks URL ingest may reach even with allow_private_urls off (e.g. an intranet wiki)
    private_url_allowlist: list[str] = Field(default_factory=list)
    """CIDR networks URL ingest may reach even with private URLs refused (JSON list, e.g. an intranet wiki)."""

    outbound_ca_file: Path | None = None
    """PEM file of extra CAs trusted for outgoing HTTPS (URL ingest, OAuth client metadata), e.g. an internal CA."""

    transcribe_url: str | None = None
    """OpenAI-compatible transcription API base URL (audio, video); unset: no transcription."""
    transcribe_api_key: str | None = None
    """API key for the transcription service."""
    transcribe_model: str = "whisper-1"
    """Transcription model name."""
    transcribe_timeout_sec: float = 300.0
    """Read timeout for one transcription request, in seconds."""
    smtp_url: str | None = None
    """Mail server for invitations and address checks (smtp://user:pass@host:587, STARTTLS if offered; smtps://...:465)."""
    smtp_from: str = "Lev <lev@localhost>"
    """The From address of Lev's mails."""
    llm_url: str | None = None
    """OpenAI-compatible chat completions base URL for summaries and key phrases; unset: built-in extractive ones."""
    llm_api_key: str | None = None
    """API key for the LLM service."""
    llm_model: str = "gpt-4o-mini"
    """Chat model name."""

    workers_inline: bool = True
    """Run the job worker inside `lev serve` (`lev serve --no-workers-inline` and `lev worker` split them)."""
    # operations (docs/operations.md)
    log_level: str = "info"
    """Log level: debug, info, warning or error."""
    log_format: str = "auto"
    """`json` (one object per line), `console` (for people), or `auto`: console when the output is a terminal, else
    json."""
    metrics_dir: Path | None = None
    """Prometheus multiprocess directory shared by the processes of one machine; unset: <data_dir>/metrics."""
    shutdown_grace_sec: float = 30.0
    """On SIGTERM, how long in-flight requests and the current job may finish."""
    max_chunks_per_item: int = 2000
    """Chunks one item is cut into at most (about 650 pages of prose); the rest of its text is kept but not indexed,
    and the item says so in its metadata (`truncated`, `indexed_chars`)."""
    jobs_per_user: int = 2
    """Jobs of one user that run at once across all workers (a fair share of the slots: another user's work is not
    queued behind one user's big imports); 0: no limit."""
    cpu_processes: int = 2
    """Child processes that parse feeds and OPML, extract pages and chunk large texts (the API never waits behind
    them); niced like the ingest threads."""
    extract_memory_mb: int = 1024
    """Memory (address space, MiB) a child process reading an uploaded document may take beyond what it holds when
    it starts; a file that needs more fails in words."""
    worker_heartbeat_sec: float = 3.0
    """How often a worker proves it is alive; one silent for 5 beats is dead and its jobs go to another worker."""
    job_max_tries: int = 3
    """A job whose worker dies (or that times out) this often marks its item failed."""
    job_retry_delay_sec: float = 10.0
    """A job that failed (database, Redis or S3 away) is tried again after this many seconds times its try number."""
    embedder: str = "local"
    """`local` (all-MiniLM-L6-v2 on CPU) or `openai` (an OpenAI-compatible embeddings API at LEV_EMBED_URL)."""
    embed_url: str | None = None
    """OpenAI-compatible embeddings API base URL (with LEV_EMBEDDER=openai)."""
    embed_api_key: str | None = None
    """API key for the embeddings service."""
    embed_model: str = "text-embedding-3-small"
    """Embedding model name (with LEV_EMBEDDER=openai)."""
    ingest_embed_nice: int = 4
    """CPU niceness added to the API's ingest embedding threads and to `lev worker` (searches keep the CPU first)."""
    ingest_embed_threads: int = 0
    """Threads embedding ingested text with the local model, each one part of a batch at a time (0: one per core)."""
    query_batch_max: int = 16
    """Most search queries embedded together in one pass when they arrive at once (1: each alone)."""

    rate_limits: str = "on"
    """`on` or `off`: per-token hourly limits and the monthly write cap."""
    limit_read: str = "1000/hour"
    """Reads per token (REST GETs, MCP reads)."""
    limit_ingest: str = "60/hour"
    """Ingests and memberships per token."""
    limit_delete: str = "60/hour"
    """Deletes per token."""
    limit_bulk: str = "30/hour"
    """Bulk deletes and folder deletes per token."""
    limit_mcp_write: str = "60/hour"
    """MCP add_to_knowledge calls per token."""
    default_write_cap: int = 200
    """Monthly writes of a new token unless `lev token create --write-cap N` (0: no cap)."""

    tier_free_tokens: int = 0
    """Active tokens a free-tier user may mint (-1: unlimited)."""
    tier_pro_tokens: int = -1
    """Active tokens a pro-tier user may mint (-1: unlimited)."""
    tier_free_minutes: int = 0
    """Monthly transcription minutes of the free tier."""
    tier_pro_minutes: int = 600
    """Monthly transcription minutes of the pro tier."""

    signup: str = "open"
    """`open` or `closed` (403 signup_closed) for sign-up on the web pages; `lev user create` works either way."""
    signup_tier: str = "free"
    """Tier of accounts created by sign-up."""
    session_days: int = 30
    """Lifetime of a browser session, in days."""
    limit_sign_in_email: str = "10/15 minutes"
    """Failed sign-ins allowed per email."""
    limit_sign_in_ip: str = "50/15 minutes"
    """Failed sign-ins allowed per source address."""
    limit_sign_up_ip: str = "20/hour"
    """Sign-up attempts (successful or not) allowed per source address."""
    limit_client_registration_ip: str = "20/hour"
    """OAuth dynamic client registrations (POST /oauth/register) allowed per source address."""
    limit_public_page: str = "300/minute"
    """Views of one published folder (its public page and its feed together) by one visitor address."""

    activity_retention_days: int = 90
    """Days activity log entries are kept."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Proxies (JSON list of CIDRs) whose X-Forwarded-For names the client address in the activity log."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins (JSON list) allowed to call /api/mcp besides the service's own."""
    max_body_bytes: int = 2 * 1024 * 1024
    """Largest JSON request body, in bytes (413 above; uploads have their own 50 MB cap)."""
    token_default_days: int = 365
    """Lifetime of a new token unless `--expires-in-days`."""
    principal_cache_sec: float = 60.0
    """Longest a process reuses an authenticated token unchecked (revocations still apply at once); 0: no cache."""
    import_max_bytes: int = 10 * 1024 * 1024
    """Largest import file (bookmarks, Pocket or Raindrop CSV, Lev export), in bytes (413 above)."""
    import_archive_max_bytes: int = 512 * 1024 * 1024
    """Largest ZIP of a folder `POST /api/v1/imports` takes, in bytes (413 above)."""
    import_archive_max_files: int = 20_000
    """Entries (files and folders) one ZIP may hold (413 above)."""
    import_archive_max_unpacked: int = 2 * 1024 * 1024 * 1024
    """Bytes the files one ZIP imports may unpack to in all (413 above; past 64 MiB, also at most 100 times the
    archive's size: a ZIP bomb is refused before anything is unpacked)."""
    import_concurrency: int = 4
    """Links one import fetches at the same time."""
    feed_poll_minutes: int = 30
    """Minutes between two checks of a followed feed (a failing feed waits longer: doubled per failure, up to a day)."""
    feed_max_entries: int = 50
    """New entries one check of a feed adds at most (a first follow takes the newest ones, not the archive)."""
    feed_max_per_user: int = 200
    """Feeds one user may follow (409 limit_reached above)."""
    opml_deadline_sec: float = 120.0
    """One OPML import in all: the feeds not followed by then are refused as not checked (import again for them)."""
    webhook_max_per_user: int = 20
    """Webhook endpoints one user may add (409 limit_reached above)."""

    # uploads / object storage (store/objects.py)
    upload_secret: str | None = None  # HMAC key for local signed upload URLs; default <data_dir>/signing.key
    """HMAC key for local signed upload URLs; unset: a random key kept in <data_dir>/signing.key."""
    object_store: str = "local"  # "local" (files under <data_dir>/objects) or "s3"
    """`local` (files under <data_dir>/objects) or `s3`."""
    s3_bucket: str | None = None
    """S3 bucket (with LEV_OBJECT_STORE=s3)."""
    s3_endpoint_url: str | None = None
    """S3 endpoint URL (MinIO, R2, ...); unset: AWS."""
    s3_region: str | None = None
    """S3 region."""
    s3_access_key: str | None = None
    """S3 access key id."""
    s3_secret_key: str | None = None
    """S3 secret access key."""

    # search tuning (tuned on SciFact train, reported on test: bench/LAB_NOTES.md, bench/RESULTS.md)
    search_candidates: int = 100
    """Candidates per signal in hybrid search (tuned on SciFact)."""
    search_semantic_weight: float = 0.6
    """Weight of cosine similarity in the hybrid blend (BM25 gets the rest)."""
    search_bm25_k1: float = 1.2
    """BM25 k1."""
    search_bm25_b: float = 0.6
    """BM25 b."""
    search_bm25_prune_df: float = 0.03
    """Terms in more than this share of chunks score but do not generate keyword candidates."""
    hnsw_ef_search: int = 40
    """pgvector HNSW ef_search floor."""
    search_exact_scan_max_chunks: int = 2000
    """Scopes with at most this many chunks are searched exactly instead of through HNSW."""

    @property
    def limits_on(self) -> bool:
        return self.rate_limits.lower() not in {"off", "false", "0", "no"}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (tests clear the cache after changing the environment)."""
    return Settings()


SECRET_SETTINGS = frozenset({"smtp_url", "transcribe_api_key", "llm_api_key", "embed_api_key", "upload_secret",
                             "s3_access_key", "s3_secret_key"})


def _shown(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_table(settings: Settings, *, markdown: bool = False) -> str:
    """Every setting: `LEV_NAME value (default)` lines, or the Markdown table the README carries."""
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if markdown:
            rows.append(f"| `LEV_{name.upper()}` | `{_shown(default)}` | {field.description or ''} |")
            continue
        value = getattr(settings, name)
        shown = "(set)" if name in SECRET_SETTINGS and value else _shown(value)
        rows.append(f"LEV_{name.upper()}={shown}" + ("" if value == default else f"   (default {_shown(default)})"))
    if markdown:
        return "\n".join(["| Setting | Default | Meaning |", "| --- | --- | --- |", *rows])
    return "\n".join(rows)
