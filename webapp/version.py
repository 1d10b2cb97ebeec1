"""The software version, written into dataset cards and run records."""

VERSION = "0.4.0"
