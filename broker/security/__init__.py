"""Who a connection is: listeners' security protocols, TLS, SASL and the authorizer."""
