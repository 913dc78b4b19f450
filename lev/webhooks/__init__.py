"""Webhooks: signed event deliveries to the user's endpoints (Standard Webhooks), from a transactional outbox.

Rooms: `events` (the outbox's one way in: `record` and the item helpers, called in the transaction that makes an
event true), `deliver` (one attempt: sign, POST through the guard, the retry schedule), `sender` (the asyncio task
in each worker that takes due deliveries when a commit wakes it or its sweep comes round, and records their
outcomes), `service` (endpoints: add, change, remove, rotate the secret, deliveries, test, re-send).
"""
