"""Conversion rate of `mdloader convert`."""
