"""The Horizontal Pod Autoscaler, written the ordinary way (see README.md)."""
