FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# Static files are collected at build time (a throwaway key: settings refuse to load without one).
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput
RUN useradd --create-home parallax && mkdir -p /data/media && chown parallax /data/media
USER parallax
EXPOSE 8000
