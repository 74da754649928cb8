import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { App } from '../types.js';

/**
 * OpenAPI 3 generated from the route schemas, served at /rest/v1/openapi.json, and a docs page
 * at /rest/v1/docs. Must be registered before the routes it describes.
 */
export async function registerOpenApi(app: App, publicUrl: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'certdesk REST API',
        version: '1',
        description:
          'Certificate ordering and management. Every response carries `success` (except GET /BaseDomain); failures carry `Message`, `ErrorId` and `ErrorField` (docs/errors.md).',
      },
      servers: [{ url: publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'Access token from POST /oauth2/token' },
        },
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/rest/v1/docs', uiConfig: { docExpansion: 'list' } });
  app.get('/rest/v1/openapi.json', { schema: { hide: true }, config: { rateLimit: false } }, async () => app.swagger());
}
