"""A scripted model that reports usage as a provider would (or as a broken one does): the bench's own."""

from bench.budget import BillingModel

__all__ = ["BillingModel"]
