"""Arbiter's core app: people and roles, the shared base model and jobs, runs, the API's input
and errors, workers. The project's wiring (settings, URLs, the Celery app) is the `arbiter`
package above every app."""
