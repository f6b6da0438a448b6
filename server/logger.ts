import { pino, type Logger } from 'pino'

export type { Logger }

// One logger for the process. Anything that may carry a credential is censored by path, and
// request bodies are never logged (they hold whole cluster objects).
export function createLogger(level: string, name: string): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.password', '*.token', '*.dsn', 'credentials', '*.credentials'],
      censor: '[redacted]',
    },
  })
}
