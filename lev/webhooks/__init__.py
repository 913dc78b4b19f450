"""Webhooks: signed event deliveries to the user's endpoints (Standard Webhooks), from a transactional outbox."""
