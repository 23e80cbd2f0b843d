"""A complete channel for Chirp, a made-up chat service, written with the channel kit."""
