"""The schema registry room: the Confluent Schema Registry REST API (api.py) on a small HTTP/1.1 server
(http.py), over the model in coordinator/schemas/, started by the composition root (service.py)."""
