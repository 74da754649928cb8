// Loaded before every test file: @peculiar/x509 needs reflect-metadata first.
import 'reflect-metadata';
