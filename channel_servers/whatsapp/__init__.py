"""The WhatsApp channel: the WhatsApp Business Cloud API's webhooks in, its messages endpoint out."""
